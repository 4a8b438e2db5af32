"""Seeds never collide: every env of every actor, replica, restart and resumed run,
every evaluation and every exploration stream gets its own child of the run's
`SeedSequence` (`pararl.seeding`)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from pararl import DQNConfig, seeding, train
from pararl.samplers.chunks.actor_pool import ActorPool


def _paths(groups: int, restarts: int, starts: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The stream paths the samplers use: (actor / replica / Ray actor index, its
    restarts, the env step the run (re)started at)."""
    return list(itertools.product(range(groups), range(restarts), starts))


@pytest.mark.parametrize("envs_per_group", [1, 4, 8, 16])
def test_no_two_envs_share_a_reset_seed(envs_per_group: int) -> None:
    seed = 0
    seeds: list[int] = []
    for path in _paths(groups=8, restarts=3, starts=(0, 40_000)):
        seeds += seeding.env_seeds(seed, envs_per_group, "env", *path)
    for k in range(10):  # ten evaluations of 20 episodes
        seeds += seeding.env_seeds(seed, 20, "eval", k)
    assert len(seeds) == len(set(seeds))


def test_no_random_stream_equals_another() -> None:
    seed = 3
    draws = {}
    for role in ("explore", "replay", "torch"):
        for path in _paths(groups=4, restarts=2, starts=(0, 1_000)):
            draws[(role, *path)] = tuple(seeding.generator(seed, role, *path).integers(0, 2**62, 4))
    for path in _paths(groups=4, restarts=2, starts=(0, 1_000)):
        env0 = seeding.env_seeds(seed, 1, "env", *path)[0]
        draws[("env", *path)] = (env0,)
    firsts = [d[0] for d in draws.values()]
    assert len(firsts) == len(set(firsts))
    # the same name is the same stream, in any process
    assert seeding.env_seeds(seed, 5, "env", 2, 1, 0) == seeding.env_seeds(seed, 5, "env", 2, 1, 0)
    # a different run seed changes everything
    assert seeding.env_seeds(seed + 1, 5, "env", 0, 0, 0) != seeding.env_seeds(
        seed, 5, "env", 0, 0, 0
    )


def test_a_restarted_actor_gets_new_streams() -> None:
    """The actor pool names actor i's streams by its restart count (no processes are
    started: only the arguments an actor would be started with)."""
    pool = object.__new__(ActorPool)
    pool.specs, pool.shared = [None, None], None  # type: ignore[list-item]
    pool.seed, pool.start_steps, pool.restarts = 5, 0, [0, 0]
    first = pool._args(1)[-1]
    pool.restarts[1] += 1
    second = pool._args(1)[-1]
    other = pool._args(0)[-1]
    assert len({first, second, other}) == 3
    envs = 8
    streams = [seeding.env_seeds(5, envs, "env", *p) for p in (first, second, other)]
    assert len(set(itertools.chain(*streams))) == 3 * envs


def test_bad_names_are_refused() -> None:
    with pytest.raises(ValueError, match="role"):
        seeding.stream(0, "nope", 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-negative"):
        seeding.stream(0, "env", -1)


def test_a_stream_is_the_child_spawn_would_give() -> None:
    """The stream `(role, *path)` is the seed sequence reached by `spawn` from the
    run's seed: the role's child, then each path index's child in turn."""
    for role, path in [("env", (3, 1, 400)), ("explore", (2,)), ("eval-actions", ())]:
        node = np.random.SeedSequence(11)
        for index in (seeding.ROLES.index(role), *path):
            node = node.spawn(index + 1)[index]
        got = seeding.stream(11, role, *path)  # type: ignore[arg-type]
        assert got.generate_state(4).tolist() == node.generate_state(4).tolist()


def test_stream_names_do_not_change_between_versions() -> None:
    """A role's index is part of every stream name under it (new roles go last),
    and a run resumed by a later version draws what it drew before."""
    assert seeding.ROLES[:4] == ("env", "explore", "torch", "replay")
    assert seeding.stream(0, "replay", 2, 7).spawn_key == (3, 2, 7)
    assert seeding.env_seeds(0, 2, "env", 0, 0, 0) == [5886404972436038331, 7160252823571740321]
    assert seeding.integer(0, "torch", 0, 0) == 1315215616313072011


SEEDLOG_RUN = dict(
    env="pararl/SeedLog-v0",
    total_steps=400,
    learning_starts=100,
    eval_every=200,
    eval_episodes=3,
    checkpoint_every=10_000,
    tensorboard=False,
    progress="none",
    hidden=(16,),
    batch_size=16,
    target_return=1e9,
)


def test_runs_in_every_mode_give_every_env_its_own_reset_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real runs, the seeds the envs were really reset with (logged by each env in
    its own process): serial (sync shares its sampler), async with 8 envs per actor,
    averaging, and an
    async run resumed; in each run, no two of its training and evaluation envs
    share a seed."""
    runs = {
        "serial": DQNConfig(mode="serial", workers=2, envs_per_worker=4, **SEEDLOG_RUN),
        "async": DQNConfig(mode="async", workers=2, envs_per_worker=8, **SEEDLOG_RUN),
        "averaging": DQNConfig(mode="averaging", workers=2, envs_per_worker=4, **SEEDLOG_RUN),
    }
    expected_envs = {"serial": 8, "async": 16, "averaging": 8}
    for name, config in runs.items():
        log_dir = tmp_path / f"seeds-{name}"
        log_dir.mkdir()
        monkeypatch.setenv("PARARL_SEED_LOG", str(log_dir))
        config.run_dir = tmp_path / name
        train(config)
        if name == "async":  # the same run, resumed: its envs start new streams
            train(DQNConfig(resume=tmp_path / name, total_steps=800))
            expected_envs[name] *= 2
        seeds = _logged(log_dir)
        assert len(seeds) == len(set(seeds)), f"{name}: two envs got the same reset seed"
        # the training envs, and at least one evaluation of 3 episodes
        assert len(seeds) >= expected_envs[name] + 3, (name, len(seeds))


def _logged(log_dir: Path) -> list[int]:
    return [int(line) for f in log_dir.glob("*.log") for line in f.read_text().split()]
