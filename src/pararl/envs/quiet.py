"""Known noise of the envs pararl builds, silenced where it starts.

MuJoCo 3.3+ warns, once per model compiled, that Gymnasium's HalfCheetah XML uses
the deprecated `settotalmass` compiler attribute (two lines on stderr per env: a
32-env run printed 32 of them). The attribute still works; the warning is not the
user's to act on. MuJoCo's warning hook (`mju_user_warning`) gets a handler that
drops that one message and prints every other one as MuJoCo would (or hands it to
a handler installed before pararl's).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

# the beginnings of MuJoCo warnings about Gymnasium's own model files
MUJOCO_NOISE = ("compiler attribute 'settotalmass' is deprecated",)

# entry points whose envs compile a MuJoCo model
MUJOCO_ENTRY_POINTS = ("gymnasium.envs.mujoco", "pararl.envs.meta")

_installed = False


def quiet_mujoco() -> None:
    """Install the filtering warning handler in this process (once)."""
    global _installed
    if _installed:
        return
    try:
        import mujoco
    except ImportError:  # the env will say what to install
        return
    previous: Callable[[str], None] | None = mujoco.get_mju_user_warning()

    def handler(message: str) -> None:
        if message.startswith(MUJOCO_NOISE):
            return
        if previous is not None:
            previous(message)
        else:  # MuJoCo's own format
            print(f"WARNING: {message}\n", file=sys.stderr, flush=True)

    mujoco.set_mju_user_warning(handler)
    _installed = True


def compiles_mujoco(entry_point: object) -> bool:
    """Whether an env with this entry point builds a MuJoCo model (or MuJoCo is
    loaded already, as for a user's own MuJoCo env after its first build)."""
    return str(entry_point).startswith(MUJOCO_ENTRY_POINTS) or "mujoco" in sys.modules


__all__ = ["MUJOCO_NOISE", "compiles_mujoco", "quiet_mujoco"]
