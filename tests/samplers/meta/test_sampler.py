"""MultiTaskSampler: task assignment, identical episodes across recv policies and
backends, truncation and termination handling, bad input."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest

from pararl.errors import UsageError
from pararl.models.gaussian import MLPGaussianPolicy
from pararl.samplers.meta.auto import Auto
from pararl.samplers.meta.recv import MinEnvs, Timeout, WaitAll
from pararl.samplers.meta.sampler import SampleResult, make_task_env, parse_recv
from pararl.vector import ParallelVectorEnv
from tests.samplers.meta.conftest import NAV, GoalSeeker, nav_sampler

RECV = ("all", "timeout=0.0001", "timeout=0.01", "min_envs=0.5", "min_envs=1", "auto")
FIELDS = ("observations", "next_observations", "actions", "rewards", "log_probs")
FLAGS = ("terminated", "truncated", "mask")


def _run(recv: object, backend: str, policy: object = None) -> SampleResult:
    with nav_sampler(recv, backend, policy) as sampler:  # type: ignore[arg-type]
        tasks = sampler.sample_tasks(3, seed=7)
        return sampler.sample(tasks, episodes_per_task=4, seed=11)


def _assert_same(a: SampleResult, b: SampleResult, exact: bool = True) -> None:
    for x, y in zip(a.episodes, b.episodes, strict=True):
        assert x.task == y.task
        np.testing.assert_array_equal(x.env_ids, y.env_ids)
        for name in FLAGS:
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name))
        for name in FIELDS:
            if exact:
                np.testing.assert_array_equal(getattr(x, name), getattr(y, name), err_msg=name)
            else:
                np.testing.assert_allclose(getattr(x, name), getattr(y, name), atol=1e-5)


def test_episodes_are_identical_for_every_recv_policy_and_backend() -> None:
    reference = _run("all", "serial")
    for recv in RECV:
        for backend in ("serial", "parallel"):
            _assert_same(reference, _run(recv, backend))


def test_auto_episodes_are_identical_after_it_switches_to_partial() -> None:
    # a negative margin makes the model always try partial: both modes in one sample
    auto = Auto(min_rounds=1, check_rounds=100, min_seconds=0.0, margin=-10.0)
    _assert_same(_run("all", "serial"), _run(auto, "parallel"))
    assert auto.steps_by_mode["wait"] > 0
    assert auto.steps_by_mode["partial"] > 0
    assert auto.decisions[0]["chose"] == "trial"


def test_mlp_policy_episodes_agree_across_recv_policies() -> None:
    # BLAS may round rows differently per batch size: equal up to float rounding.
    policy = MLPGaussianPolicy(2, 2, hidden=(32, 32), seed=0)
    reference = _run("all", "serial", policy)
    _assert_same(reference, _run("timeout=0.0001", "parallel", policy), exact=False)
    _assert_same(reference, _run("auto", "parallel", policy), exact=False)


def test_each_env_runs_the_task_it_was_given() -> None:
    with nav_sampler() as sampler:
        for round_ in range(2):  # new tasks between samples: reset_task again
            tasks = sampler.sample_tasks(6, seed=round_)
            result = sampler.sample(tasks, episodes_per_task=2, seed=round_)
            for episodes in result.episodes:
                goal = np.asarray(episodes.task["goal"])
                distance = np.linalg.norm(episodes.next_observations - goal, axis=-1)
                np.testing.assert_allclose(episodes.rewards, -distance, rtol=1e-6)
                assert episodes.mask.all()
            goals = sampler.venv.get_attr("goal")
            assert [tuple(g) for g in goals] == [t["goal"] for t in tasks]


def test_tasks_are_spread_over_envs_and_workers() -> None:
    with nav_sampler(workers=2, envs_per_worker=3) as sampler:
        tasks = sampler.sample_tasks(3, seed=0)
        result = sampler.sample(tasks, episodes_per_task=4, seed=0)
        ids = [e.env_ids for e in result.episodes]
        assert [sorted(set(i.tolist())) for i in ids] == [[0, 3], [1, 4], [2, 5]]
        assert all(len(i) == 4 for i in ids)  # 2 envs x 2 episodes each
        assert result.stats.env_steps == 6 * 2 * 20


def test_reset_task_mid_run_changes_only_the_envs_named() -> None:
    fns = [functools.partial(make_task_env, NAV, 50, {})] * 4
    venv = ParallelVectorEnv(fns, num_workers=2, autoreset_mode="SameStep", worker_timeout=20.0)
    try:
        venv.reset_task([{"goal": (0.1 * i, 0.0)} for i in range(4)])
        venv.reset(seed=0)
        venv.step(np.zeros((4, 2), np.float32))
        venv.reset_task([{"goal": (0.0, 0.4)}, {"goal": (0.0, -0.4)}], env_ids=[3, 0])
        assert venv.get_attr("goal") == ((0.0, -0.4), (0.1, 0.0), (0.2, 0.0), (0.0, 0.4))
        _, rewards, *_ = venv.step(np.zeros((4, 2), np.float32))
        np.testing.assert_allclose(rewards, [-0.4, -0.1, -0.2, -0.4], rtol=1e-6)
    finally:
        venv.close()


def test_truncated_episode_keeps_its_final_observation_apart_from_the_reset() -> None:
    result = _run("timeout=0.0001", "parallel")
    for episodes in result.episodes:
        assert episodes.truncated[:, -1].all()
        assert not episodes.truncated[:, :-1].any()
        last = episodes.next_observations[:, -1]
        assert np.abs(last).sum(axis=-1).min() > 0  # the real final position
        np.testing.assert_array_equal(episodes.observations[:, 0], 0.0)  # every reset
        np.testing.assert_array_equal(  # inside an episode, next obs = following obs
            episodes.next_observations[:, :-1], episodes.observations[:, 1:]
        )


def test_early_termination_pads_the_episode_and_starts_the_next() -> None:
    with nav_sampler("min_envs=1", policy=GoalSeeker((0.25, 0.0))) as sampler:
        result = sampler.sample([{"goal": (0.25, 0.0)}] * 2, episodes_per_task=6, seed=0)
    for episodes in result.episodes:
        np.testing.assert_array_equal(episodes.lengths, 3)  # 0.1 + 0.1 + 0.05
        assert episodes.terminated[:, 2].all()
        assert not episodes.truncated.any()
        assert not episodes.mask[:, 3:].any()
        assert not episodes.rewards[:, 3:].any()
        np.testing.assert_allclose(episodes.next_observations[:, 2], [[0.25, 0.0]] * 6)
        np.testing.assert_array_equal(episodes.observations[:, 0], 0.0)


def test_auto_records_its_measurements_and_waits_with_one_worker() -> None:
    auto = Auto(min_rounds=2, min_seconds=0.0)
    with nav_sampler(auto, episode_length=30) as sampler:
        sampler.sample(sampler.sample_tasks(3, seed=0), episodes_per_task=2, seed=0)
    decision = auto.decisions[0]
    assert decision["chose"] in ("wait", "trial")
    assert decision["after_wait_rounds"] == 2
    assert decision["mean_step_s"] > 0
    assert decision["forward_all_s"] > 0
    assert decision["t_wait_s"] > decision["mean_step_s"]
    assert 0.0 <= auto.summary()["partial_share"] <= 1.0
    serial = Auto()
    with nav_sampler(serial, backend="serial") as sampler:
        sampler.sample(sampler.sample_tasks(3, seed=0), episodes_per_task=2, seed=0)
    assert serial.summary()["partial_share"] == 0.0
    assert not serial.decisions


def test_parse_recv() -> None:
    assert isinstance(parse_recv("all"), WaitAll)
    assert isinstance(parse_recv("auto"), Auto)
    assert parse_recv("timeout=1e-4") == Timeout(1e-4)
    assert parse_recv("min_envs=0.25") == MinEnvs(0.25)


@pytest.mark.parametrize(
    "spec", ["bogus", "timeout=0", "timeout=x", "min_envs=1.5", "min_envs=-1", "min_envs=0"]
)
def test_bad_recv_policies_raise_usage_errors(spec: str) -> None:
    with pytest.raises(UsageError):
        parse_recv(spec)


def test_bad_sampler_input_raises_usage_errors() -> None:
    with nav_sampler(backend="serial") as sampler:
        with pytest.raises(UsageError, match="spread evenly"):
            sampler.sample(sampler.sample_tasks(4), episodes_per_task=2)
        with pytest.raises(UsageError, match="multiple"):
            sampler.sample(sampler.sample_tasks(3), episodes_per_task=3)
    with pytest.raises(UsageError, match="not a task env"):
        nav_sampler_for("CartPole-v1")
    with pytest.raises(UsageError, match="acts in 3 dims"):
        nav_sampler(policy=MLPGaussianPolicy(2, 3), backend="serial")
    with pytest.raises(UsageError, match=">= 1"):
        nav_sampler(workers=0)


def nav_sampler_for(env_id: str) -> None:
    from pararl.models.gaussian import LinearGaussianPolicy
    from pararl.samplers.meta.sampler import MultiTaskSampler

    gym.spec(env_id)
    MultiTaskSampler(
        env_id, LinearGaussianPolicy(4, 1), num_workers=1, envs_per_worker=1, backend="serial"
    )
