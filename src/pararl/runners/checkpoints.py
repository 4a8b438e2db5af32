"""A run's checkpoint files, and where its replay memory goes.

`checkpoints/` holds `best` (the best evaluated weights), `final` or `interrupted`
(how the run ended), `step_N` (every `--checkpoint-every` env steps), `latest`
(every `--checkpoint-every-s` seconds, replaced each time) and, for DQN, SAC and TD3, `replay.pt`.

A replay memory is the bulk of a DQN run's state (an Atari one is 0.7 GB), so it is
written once, to `replay.pt`, and only with the checkpoint a resume needs it for:
`final` or `interrupted`. No checkpoint file holds it. `replay.pt` records the env
steps it was saved at; a resume takes it only with a checkpoint of the same steps
(after a crash, from `latest` or `step_N`, the memory refills instead). A population's
(`--seeds`) is the list of its agents' memories, in the agents' order, in one
`replay.pt`.
"""

from __future__ import annotations

from typing import Any

from pararl import checkpoint
from pararl.errors import interrupts_held
from pararl.rundir import RunDir

WITH_REPLAY = ("final", "interrupted")  # the checkpoints whose replay memory is saved


def save(run: RunDir, name: str, state: dict[str, Any]) -> None:
    """Save checkpoint `name` of `state`; its replay memory, if any, goes to
    `replay.pt` when `name` is one of `WITH_REPLAY`, and is dropped otherwise.
    The replay file is written first: a checkpoint that points to it never exists
    without it, and Ctrl-C or SIGTERM waits until both are written (between them, it
    would leave a memory that no checkpoint of its steps points to)."""
    replay = state.get("replay")
    with interrupts_held():
        if replay is None:
            checkpoint.save(run.checkpoint(name), state)
            return
        env_steps = checkpoint.Header.of(state).env_steps
        if name in WITH_REPLAY:
            checkpoint.save(run.replay, {"format": 1, "env_steps": env_steps, "replay": replay})
        checkpoint.save(run.checkpoint(name), {**state, "replay": None})


Memory = dict[str, Any] | list[dict[str, Any]]  # a run's; a population's, one per agent


def replay_for(run: RunDir, state: dict[str, Any], trust: bool = False) -> Memory | None:
    """The replay memory saved with the checkpoint `state` (a population's: the list
    of its agents'), or None when there is none for its env steps (a run resumed
    after a crash refills its memory). `trust`: unpickle a file the weights-only
    loader refuses (`checkpoint.load`)."""
    if state.get("replay") is not None:  # a checkpoint from before replay.pt
        return _memory(state["replay"])
    if not run.replay.is_file():
        return None
    saved = checkpoint.load(run.replay, trust)
    if int(saved.get("env_steps", -1)) != checkpoint.Header.of(state).env_steps:
        return None
    return _memory(saved["replay"])


def _memory(saved: Any) -> Memory:
    return [dict(m) for m in saved] if isinstance(saved, list) else dict(saved)


__all__ = ["WITH_REPLAY", "Memory", "replay_for", "save"]
