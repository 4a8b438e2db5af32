"""MAML-TRPO's spec: the multi-task sampler and the meta-learner; its policy is the
Gaussian meta-policy, which `adapt` turns into a task's, and its own `pararl
evaluate` measures the return after adaptation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pararl.config import EvaluateConfig, MAMLConfig
from pararl.registry.spec import Algorithm


def train(config: MAMLConfig, **kwargs: Any) -> Any:
    from pararl.algos.maml import check_spaces
    from pararl.runners import maml
    from pararl.runners.setup import compose

    return compose(config, "maml", check_spaces, maml.plan, **kwargs)


def policy(config: MAMLConfig, checkpoint: dict[str, Any]) -> Any:
    from pararl.algos.maml import load_model

    return load_model(config, checkpoint)


def evaluation(cfg: EvaluateConfig, write_video: Callable[..., None]) -> dict[str, float]:
    from pararl.runners.maml_eval import run

    return run(cfg, write_video)


def make_env(config: MAMLConfig, render_mode: str | None) -> Any:
    """A task env as the sampler makes them (its episode length)."""
    from pararl.samplers.meta.sampler import make_task_env

    kwargs = {**config.env_kwargs}
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    return make_task_env(config.env, config.episode_length, kwargs)


def adapt(
    network: Any, config: MAMLConfig, task: Any, episodes: int | None, steps: int, seed: int
) -> Any:
    """(the network adapted to `task`, the returns before and after each step)."""
    import copy

    from pararl.mp.topology import physical_cores
    from pararl.runners.maml_eval import adaptation_returns

    out = adaptation_returns(
        config, network, [task], episodes or config.fast_batch_size, steps, seed, physical_cores()
    )
    adapted = copy.deepcopy(network)
    adapted.load_state_dict({name: p[0] for name, p in out.params.items()})
    return adapted, out.returns[:, 0]


SPEC = Algorithm(
    "maml",
    "meta-train MAML-TRPO (multi-task sampler)",
    MAMLConfig,
    train,
    policy,
    evaluation=evaluation,
    make_env=make_env,
    adapt=adapt,
)
