"""The evaluation child's side: set up by its first message, it answers "eval"
requests (weights as numpy arrays -> episodes, greedy or sampled, with progress reports on the
way) and "plot" requests (the learning curve, drawn here where matplotlib is
already loaded)."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from multiprocessing.connection import Connection

import gymnasium as gym
import torch
from gymnasium.envs.registration import EnvSpec

from pararl.evaluation.episodes import EvalActions, Evaluator
from pararl.models.acting import Policy
from pararl.mp.threads import one_thread
from pararl.weights.base import load_numpy_state


def serve(
    conn: Connection,
    env_fn: Callable[[], gym.Env],
    episodes: int,
    seed: int,
    stream: tuple[int, ...],
    model_fn: Callable[[], torch.nn.Module],
    spec: EnvSpec | None,
    max_steps: int,
    actions: EvalActions,
    seeds: tuple[int, ...] = (),
) -> None:
    if spec is not None:
        register_carried(spec)
    one_thread()
    evaluator = Evaluator(env_fn, episodes, seed, stream, max_steps, actions, seeds=seeds)
    model = model_fn()
    assert isinstance(model, Policy), f"a {type(model).__name__} has no acting call"
    warm = False
    try:
        while True:
            if not warm and not conn.poll(0):
                _warm_up_plotting()  # while idle, once: a request can wait that long
                warm = True
            command, payload = conn.recv()  # EOFError if the parent is gone: we exit
            if command == "close":
                return
            if command == "plot":
                from pararl.plots import learning_curve

                conn.send((True, learning_curve(*payload)))
                continue
            load_numpy_state(model, payload)
            conn.send((True, evaluator.run(model, lambda p: conn.send((True, p)))))
    finally:
        evaluator.close()


def register_carried(spec: EnvSpec) -> None:
    """Register an env the trainer registered at run time. Its entry point's module
    is imported first: if it registers the id itself (ale-py, a user's module that
    calls `gym.register` on import), that registration stands, and Gymnasium has no
    cause to warn that a later import overrides ours."""
    if spec.id in gym.registry:
        return
    module = str(spec.entry_point).partition(":")[0] if isinstance(spec.entry_point, str) else ""
    if module and module != "__main__":
        with contextlib.suppress(Exception):  # building the env will say what is wrong
            importlib.import_module(module)
    if spec.id not in gym.registry:
        gym.registry[spec.id] = spec


def _warm_up_plotting() -> None:
    from matplotlib import figure  # noqa: F401
    from matplotlib.backends import backend_agg  # noqa: F401

    import pararl.plots  # noqa: F401


__all__ = ["serve"]
