"""A recurrent core (LSTM or GRU) between an actor-critic's encoder and its heads:
what gives a policy memory (`--recurrent`).

The core is Sample Factory's `forward_core`: the encoder's features of each step go
in, the core's output goes to the policy and value heads, and the hidden state goes
on to the next step of the same env. A new episode starts from zeros: where `first`
is True (the observation is an episode's first), that env's state is reset before
the step.

The state of a batch of B envs is one tensor `[B, S, H]`, batch first, so that a
rollout stores each env's row and an update picks rows by env: `S` is the number of
layers for a GRU, twice that for an LSTM (the hidden states, then the cell states),
and `H` the core's width. A critic with a core of its own (`CoreSettings.critic`, as
sb3-contrib's `enable_critic_lstm`) keeps its rows after the actor's, in the same
tensor, so that whatever stores, picks or resets states never knows there are two.

Acting steps the core once per env step, batched over the envs (`step`). The update
replays whole sequences (`sequence`): the rollout's `[T, M]` steps of M envs from
their stored starting states. A sequence that no episode start cuts is one call of
`nn.LSTM` / `nn.GRU`. An episode start inside it cuts it, and `replay` says how:

- `padded` (the default): every piece between episode starts is its own sequence,
  from the stored state (each env's first piece) or from zeros, and all of them go
  through the core in one call, padded to the longest (the padding's outputs are
  dropped), as sb3-contrib pads its sequences;
- `packed`: the same pieces as a packed batch of variable lengths
  (`torch.nn.utils.rnn.pack_padded_sequence`), which skips the padding's compute;
- `loop`: one call of the core per time step, each env's state multiplied by
  `1 - first` first (CleanRL's `ppo_atari_lstm.py`): a Python loop over the T steps.

All three give the outputs acting gave, to float tolerance
(`tests/models/test_recurrent.py`). On the CPU, padded is the fastest of the three:
`python -m benchmarks recurrent_core` times them (BENCHMARKS.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

CoreKind = Literal["lstm", "gru"]
Replay = Literal["padded", "packed", "loop"]
CORE_KINDS: tuple[CoreKind, ...] = ("lstm", "gru")


@dataclass(frozen=True)
class CoreSettings:
    """What a recurrent core is: its kind, width and layers; `critic`: the critic
    reads a core of its own (sb3-contrib's `enable_critic_lstm`), not the actor's."""

    kind: CoreKind
    size: int
    layers: int = 1
    critic: bool = False

    def describe(self) -> str:
        layers = f"{self.layers} layer{'s' if self.layers > 1 else ''}"
        own = ", and one of the critic's own" if self.critic else ""
        return f"{self.kind.upper()} core of {self.size} ({layers}){own}"


class RecurrentCore(nn.Module):
    """An LSTM or GRU over features of `in_features` floats per step (see the module
    docstring for the state's layout and the two ways to replay a sequence)."""

    def __init__(self, in_features: int, spec: CoreSettings, replay: Replay = "padded"):
        super().__init__()
        if spec.kind not in CORE_KINDS:
            raise ValueError(f"unknown core {spec.kind!r}; one of {', '.join(CORE_KINDS)}")
        if spec.size < 1 or spec.layers < 1:
            raise ValueError("a recurrent core needs a size and layers of at least 1")
        self.spec, self.replay = spec, replay
        self.lstm = spec.kind == "lstm"
        rnn = nn.LSTM if self.lstm else nn.GRU
        self.rnn = rnn(in_features, spec.size, spec.layers)
        self.features = spec.size
        for name, param in self.rnn.named_parameters():  # as CleanRL's and SB3's cores
            if name.startswith("weight"):
                nn.init.orthogonal_(param, 1.0)
            else:
                nn.init.zeros_(param)

    @property
    def rows(self) -> int:
        """S: the state's rows per env (layers, twice over for an LSTM's cells)."""
        return self.spec.layers * (2 if self.lstm else 1)

    def step(
        self, x: torch.Tensor, state: torch.Tensor, first: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of B envs: features `[B, F]`, their states `[B, S, H]` and `first`
        `[B]` bools (those rows start from zeros); the outputs `[B, H]` and the next
        states."""
        out, last = self._run(x.unsqueeze(0), _reset(state, first))
        return out.squeeze(0), last

    def sequence(self, x: torch.Tensor, state: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
        """Replay `[T, M]` steps of M envs: features `[T, M, F]`, the states before the
        first step `[M, S, H]`, `first` `[T, M]` bools; the outputs `[T, M, H]`, each
        the output acting gave at that step."""
        starts = first[1:].any(0)  # envs whose sequence an episode start cuts
        if not bool(starts.any()):
            return self._run(x, _reset(state, first[0]))[0]
        if self.replay == "loop":
            return self._loop(x, state, first)
        return self._pieces(x, state, first)

    def _loop(self, x: torch.Tensor, state: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
        outs = []
        for t in range(len(x)):
            out, state = self.step(x[t], state, first[t])
            outs.append(out)
        return torch.stack(outs)

    def _pieces(self, x: torch.Tensor, state: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
        steps, envs = first.shape
        pieces = Pieces.of(first.cpu().numpy())
        flat = x.reshape(steps * envs, -1)
        index = torch.as_tensor(pieces.index, device=x.device)  # [L, P] rows of `flat`
        padded = flat[index]  # [L, P, F]
        # the first piece of each env starts from its stored state (reset if its first
        # step starts an episode), the others from zeros
        initial = torch.zeros(len(pieces.env), *state.shape[1:], device=x.device)
        carried = torch.as_tensor(pieces.carried, device=x.device)
        envs_of = torch.as_tensor(pieces.env[pieces.carried], device=x.device)
        initial[carried] = state[envs_of]
        if self.replay == "packed":
            packed = pack_padded_sequence(
                padded, torch.as_tensor(pieces.length), enforce_sorted=False
            )
            out, _ = self._run_packed(packed, initial)
            unpacked, _ = pad_packed_sequence(out, total_length=len(index))  # [L, P, H]
        else:  # padded: the steps past a piece's end run on and are dropped
            unpacked = self._run(padded, initial)[0]
        valid = torch.as_tensor(pieces.valid, device=x.device)
        result = x.new_empty(steps * envs, self.features)
        result[index[valid]] = unpacked[valid]
        return result.reshape(steps, envs, self.features)

    def _run(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, last = self.rnn(x, self._unpack(state))
        return out, self._pack(last)

    def _run_packed(
        self, x: torch.nn.utils.rnn.PackedSequence, state: torch.Tensor
    ) -> tuple[torch.nn.utils.rnn.PackedSequence, torch.Tensor]:
        out, last = self.rnn(x, self._unpack(state))
        return out, self._pack(last)

    def _unpack(self, state: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """`[B, S, H]` -> what nn.LSTM / nn.GRU take (`[layers, B, H]`, or a pair)."""
        layers = self.spec.layers
        major = state.transpose(0, 1)
        if self.lstm:
            return major[:layers].contiguous(), major[layers:].contiguous()
        return major.contiguous()

    def _pack(self, last: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        if isinstance(last, tuple):
            last = torch.cat(last, dim=0)
        return last.transpose(0, 1)


def _reset(state: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
    """The states, zeroed in the rows whose episode starts."""
    keep = (~first.to(torch.bool)).to(state.dtype)
    return state * keep.view(-1, *([1] * (state.dim() - 1)))


@dataclass(frozen=True)
class Sequences:
    """What an update replays a minibatch's rows with: they are `[T, M]` steps of M
    envs, flattened time-major (row t * M + m); `start` holds the M envs' states before
    the first step `[M, S, H]` and `first` `[T * M]` whether each row's observation
    starts an episode."""

    start: torch.Tensor
    first: torch.Tensor

    @property
    def envs(self) -> int:
        return len(self.start)

    def steps_first(self) -> torch.Tensor:
        """`first` as `[T, M]`."""
        return self.first.reshape(-1, self.envs)


@dataclass(frozen=True)
class Pieces:
    """The pieces that episode starts cut `[T, M]` sequences into, as a padded batch:
    `index[l, p]` is the flat row (t * M + m) of piece p's l-th step (row 0 past its
    end, where `valid` is False), `length[p]` its steps, `env[p]` its env, and
    `carried[p]` whether it starts from the env's stored state (the env's first
    piece, not starting an episode)."""

    index: np.ndarray
    valid: np.ndarray
    length: np.ndarray
    env: np.ndarray
    carried: np.ndarray

    @classmethod
    def of(cls, first: np.ndarray) -> Pieces:
        steps, envs = first.shape
        cut = first.copy()
        cut[0] = True  # every env's sequence starts a piece at step 0
        env, t_start = np.nonzero(cut.T)  # by env, then by time
        t_end = np.empty_like(t_start)
        t_end[:-1] = t_start[1:]
        last = np.r_[env[1:] != env[:-1], True]
        t_end[last] = steps
        length = t_end - t_start
        offsets = np.arange(length.max())[:, None]  # [L, 1]
        valid = offsets < length[None, :]
        index = np.where(valid, (t_start[None, :] + offsets) * envs + env[None, :], 0)
        carried = (t_start == 0) & ~first[0, env]
        return cls(index, valid, length, env, carried)


__all__ = [
    "CORE_KINDS",
    "CoreKind",
    "CoreSettings",
    "Pieces",
    "RecurrentCore",
    "Replay",
    "Sequences",
]
