"""Envs given from Python, as SB3 and CleanRL users give them: a factory (a lambda,
a function), an env class or an `EnvSpec` trains through `train(...)` with worker
processes; a built env or anything else is refused when the config is made, in one
line. A factory's run is saved by the factory's name, and what cannot rebuild it
from the run directory (`pararl evaluate RUN`, `--resume`) says in one line how to
give it again; `load(RUN, env=...)` and `train(...Config(resume=RUN, env=...))` do."""

from __future__ import annotations

import dataclasses
import json
import pickle
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.envs.classic_control import CartPoleEnv

from pararl import MAMLConfig, PPOConfig, load, train
from pararl.config import saved_config
from pararl.config.env_source import EnvFactory, env_source
from pararl.envs.make import make_env, time_limit
from pararl.errors import UsageError
from pararl.runners.setup import _spec_for_child

# PPO with 2 env worker processes, a few seconds a run
TINY = dict(
    mode="sync", workers=2, envs_per_worker=2, total_steps=256, num_steps=32,
    minibatch_size=64, update_epochs=1, hidden=(16,), eval_every=256, eval_episodes=2,
    eval_in="inline", progress="none", tensorboard=False, target_return=10_000.0,
)  # fmt: skip


def make_cartpole() -> gym.Env:
    return gym.make("CartPole-v1")


# each kind of env= and the name its run is saved by (a registered spec: its id)
FACTORIES: dict[str, tuple[Callable[..., Any] | gym.envs.registration.EnvSpec, str]] = {
    "lambda": (lambda: gym.make("CartPole-v1"), "tests.test_env_factories.<lambda>()"),
    "class": (CartPoleEnv, "gymnasium.envs.classic_control.cartpole.CartPoleEnv()"),
    "spec": (gym.spec("CartPole-v1"), "CartPole-v1"),
    "function": (make_cartpole, "tests.test_env_factories.make_cartpole()"),
}


@pytest.mark.parametrize("kind", FACTORIES)
def test_each_kind_trains_with_worker_processes(kind: str, tmp_path: Path) -> None:
    env, name = FACTORIES[kind]
    session = train(PPOConfig(env=env, run_dir=tmp_path / "run", **TINY))  # type: ignore[arg-type]
    assert session is not None
    assert session.last_eval is not None
    assert session.config.workers == 2
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["env"] == name
    assert saved["resolved"].get("env_factory") == (None if kind == "spec" else name)
    if kind != "class":  # gym.make'd: the id it was made from is said too
        assert saved["resolved"].get("env_made_from", "CartPole-v1") == "CartPole-v1"
    assert saved_config(tmp_path / "run").env == name  # config.json reads back


@pytest.mark.slow
def test_a_lambda_of_this_module_reaches_the_evaluation_process(tmp_path: Path) -> None:
    """The spawned evaluation process gets the factory pickled by value, with the
    names it uses (here a class defined in this module)."""
    tiny = {**TINY, "eval_in": "process"}
    make = lambda: gym.wrappers.TimeLimit(Tiny(), Tiny.LIMIT)  # noqa: E731
    session = train(PPOConfig(env=make, run_dir=tmp_path / "run", **tiny))  # type: ignore[arg-type]
    assert session is not None
    facts = json.loads((tmp_path / "run" / "config.json").read_text())["resolved"]
    assert facts["eval_in"] == "process"
    assert facts["eval_max_steps"] == Tiny.LIMIT  # the factory's own time limit
    assert session.last_eval == Tiny.LIMIT  # every step pays 1 until the limit


class Tiny(gym.Env[Any, int]):
    """Pays 1 a step and never ends (its factory gives it a time limit of `LIMIT`)."""

    LIMIT = 7
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,))
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        return self.observation_space.sample() * 0, {}

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict]:
        return self.observation_space.sample() * 0, 1.0, False, False, {}


def test_a_built_env_or_another_type_is_refused_when_the_config_is_made() -> None:
    built = gym.make("CartPole-v1")
    for wrong, says in (
        (built, "env='CartPole-v1' or a factory, e.g. env=lambda: CartPoleEnv(...)"),
        (5, "must be a registered env id, a factory"),
        (dict, "the class dict, which is not a gymnasium.Env"),
    ):
        with pytest.raises(UsageError) as raised:
            PPOConfig(env=wrong)  # type: ignore[arg-type]
        assert says in str(raised.value)
        assert "\n" not in str(raised.value)
    built.close()
    with pytest.raises(UsageError, match="MAML builds its task envs by id"):
        MAMLConfig(env=lambda: gym.make("CartPole-v1")).validate()


def test_a_spec_is_its_id_with_the_arguments_its_registration_lacks() -> None:
    changed = dataclasses.replace(gym.spec("CartPole-v1"), kwargs={"sutton_barto_reward": True})
    assert env_source(changed, {}) == ("CartPole-v1", {"sutton_barto_reward": True})
    assert env_source(changed, {"sutton_barto_reward": False})[1] == {"sutton_barto_reward": False}
    unregistered = gym.envs.registration.EnvSpec("Mine-v0", entry_point=CartPoleEnv)
    source, kwargs = env_source(unregistered, {})
    assert isinstance(source, EnvFactory)
    assert kwargs == {}
    assert isinstance(make_env(source).unwrapped, CartPoleEnv)


def test_a_factory_travels_by_value_and_one_that_cannot_is_evaluated_in_process() -> None:
    size = 3
    factory = EnvFactory(lambda: gym.make("CartPole-v1", max_episode_steps=size), "f()")
    again = pickle.loads(pickle.dumps(factory))  # as to a spawned process
    assert again.name == "f()"
    env = make_env(again)
    assert time_limit(env) == size
    env.close()
    assert _spec_for_child(factory) is None  # nothing registered to carry
    lock = threading.Lock()
    held = EnvFactory(lambda: lock and gym.make("CartPole-v1"), "g()")
    assert _spec_for_child(held) is False  # unpicklable: not sent to the child


@pytest.fixture(scope="module")
def factory_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("factory") / "run"
    train(PPOConfig(env=lambda: gym.make("CartPole-v1"), run_dir=run, **TINY))  # type: ignore[arg-type]
    return run


def test_load_takes_the_factory_and_acts(factory_run: Path) -> None:
    with pytest.raises(UsageError, match=r"give the factory again from Python"):
        load(factory_run)
    agent = load(factory_run, env=lambda: gym.make("CartPole-v1"))
    env = agent.make_env()
    obs, _ = env.reset(seed=0)
    assert env.action_space.contains(agent.act(obs))
    env.close()


def test_evaluate_and_resume_say_in_one_line_what_they_need(factory_run: Path, pararl: Any) -> None:
    for args in (("evaluate", str(factory_run)), ("train", "--resume", str(factory_run))):
        done = pararl(*args)
        assert done.returncode == 2
        [line] = done.stderr.strip().splitlines()
        assert "made in Python by tests.test_env_factories.factory_run.<locals>.<lambda>()" in line
        assert "pararl.load(RUN, env=factory)" in line


def test_resume_takes_the_factory_again(factory_run: Path) -> None:
    config = PPOConfig(resume=factory_run, env=lambda: gym.make("CartPole-v1"), total_steps=512)
    session = train(config)
    assert session is not None
    assert load(factory_run, "final", env=make_cartpole).env_steps == 512
