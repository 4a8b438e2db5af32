"""Where to act and where to learn, chosen by measurement (the CPU/GPU placement post's question).

Small policies act fastest on the CPU (a GPU round trip per step costs more than
the forward pass); larger ones learn faster on a GPU. `auto` times both at
start-up, transfers included, and takes the faster; the timings are kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from pararl.errors import UsageError
from pararl.intraop import torch_threads
from pararl.observations import WHOLE, Leaf, map_leaves, stored
from pararl.optim import FlatAdam


def resolve_device(name: str, flag: str = "--device") -> torch.device:
    """`auto` -> CUDA when present, else CPU (DQN's, SAC's and MAML's `--device`; PPO's
    `auto` is measured, `choose_devices`); asking for CUDA without it is an error that
    names `flag`."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"{flag} cuda, but CUDA is not available here; use {flag} cpu or auto")
    return torch.device(name)


def available_devices() -> list[torch.device]:
    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices.append(torch.device("cuda"))
    return devices


def _time_it(
    fn: Callable[[], object], device: torch.device, repeats: int, threads: int | None = None
) -> float:
    """The median time of `repeats` calls after a warm-up call, with torch's intra-op
    threads at `threads` (None: as they are) and restored after. The median, not the
    mean: a few calls slowed by other work at start-up (processes starting, a first
    use of a thread pool) would move a mean by tens of times and the choice with it."""
    with torch_threads(threads):
        fn()  # warm-up (allocations, kernels, the thread pool)
        times = []
        for _ in range(repeats):
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            fn()
            if device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    return float(np.median(times))


@dataclass
class DeviceChoice:
    act: torch.device
    learn: torch.device
    timings_ms: dict[str, float] = field(default_factory=dict)
    reason: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "act": str(self.act),
            "learn": str(self.learn),
            "reason": self.reason,
            "timings_ms": {k: round(v, 4) for k, v in self.timings_ms.items()},
        }


def example_obs(
    obs_shape: int | tuple[int, ...],
    batch: int,
    dtype: npt.DTypeLike,
    leaves: Sequence[Leaf] = (),
) -> Any:
    """A batch of observations to time with: random floats, or zeros of an image dtype
    (what the sampler hands the model); given `leaves` (what the multi-input encoder
    reads), a dict of such batches, discrete leaves at their lowest values (a bare
    discrete observation: its one batch)."""
    if leaves:
        batches = {leaf.name: _example_leaf(leaf, batch) for leaf in leaves}
        return batches if stored(leaves) else batches[WHOLE]
    shape = (batch, obs_shape) if isinstance(obs_shape, int) else (batch, *obs_shape)
    if np.dtype(dtype).kind == "f":
        return torch.randn(shape)
    return torch.from_numpy(np.zeros(shape, dtype))


def _example_leaf(leaf: Leaf, batch: int) -> torch.Tensor:
    if leaf.kind == "discrete":
        lowest = np.asarray(leaf.start, leaf.dtype).reshape(leaf.shape)
        return torch.from_numpy(np.broadcast_to(lowest, (batch, *leaf.shape)).copy())
    return example_obs(leaf.shape, batch, leaf.dtype)


def _on(obs: Any, device: torch.device) -> Any:
    return map_leaves(lambda t: t.to(device), obs)


def time_forward(
    model: nn.Module,
    obs_shape: int | tuple[int, ...],
    batch: int,
    device: torch.device,
    repeats: int = 20,
    obs_dtype: npt.DTypeLike = np.float32,
    threads: int | None = None,
    leaves: Sequence[Leaf] = (),
) -> float:
    """One policy forward at the sampling batch size: numpy obs in, actions out, on
    `threads` torch threads (None: as set)."""
    model = model.to(device)
    obs = example_obs(obs_shape, batch, obs_dtype, leaves)

    @torch.no_grad()
    def step() -> object:
        return model.act_tensors(_on(obs, device))[0].cpu()  # type: ignore[operator]

    return _time_it(step, device, repeats, threads)


def time_update(
    model: nn.Module,
    obs_shape: int | tuple[int, ...],
    batch: int,
    device: torch.device,
    repeats: int = 10,
    obs_dtype: npt.DTypeLike = np.float32,
    threads: int | None = None,
    leaves: Sequence[Leaf] = (),
) -> float:
    """One gradient step at the minibatch size, the host-to-device copy included, on
    `threads` torch threads (None: as set)."""
    model = model.to(device)
    optimizer = FlatAdam(model.parameters(), lr=1e-4)
    obs = example_obs(obs_shape, batch, obs_dtype, leaves)

    def step() -> object:
        values = model.value(_on(obs, device))  # type: ignore[operator]
        loss = values.pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return _time_it(step, device, repeats, threads)


def choose_devices(
    make_model: Callable[[], nn.Module],
    obs_shape: int | tuple[int, ...],
    act_batch: int,
    learn_batch: int,
    act: str,
    learn: str,
    obs_dtype: npt.DTypeLike = np.float32,
    act_threads: int | None = None,
    update_threads: int | None = None,
    leaves: Sequence[Leaf] = (),
) -> DeviceChoice:
    """Resolve `act`/`learn` (cpu | cuda | auto); `auto` takes the faster measured device.
    `obs_shape` (or a flat size) and `obs_dtype`: the observations timed with (or
    `leaves`: those of Dict and Tuple observations).
    `act_threads`, `update_threads`: the torch threads the run will act and update
    with; the timings use them (None: torch's current count), since a small network's
    forward timed on every thread of a large host can look slower on the CPU than on
    a GPU when the run then acts on one. The timing builds its own models and draws
    nothing from the run's random streams (they are forked around it)."""
    devices = available_devices()
    for flag, value in (("--act-device", act), ("--learn-device", learn)):
        if value != "auto":
            resolve_device(value, flag)  # refuses CUDA where there is none
    timings: dict[str, float] = {}
    if "auto" in (act, learn) and len(devices) > 1:
        with torch.random.fork_rng():
            for device in devices:
                timings[f"forward_{device.type}"] = 1e3 * time_forward(
                    make_model(),
                    obs_shape,
                    act_batch,
                    device,
                    obs_dtype=obs_dtype,
                    threads=act_threads,
                    leaves=leaves,
                )
                timings[f"update_{device.type}"] = 1e3 * time_update(
                    make_model(),
                    obs_shape,
                    learn_batch,
                    device,
                    obs_dtype=obs_dtype,
                    threads=update_threads,
                    leaves=leaves,
                )

    def pick(value: str, kind: str) -> torch.device:
        if value != "auto":
            return torch.device(value)
        if len(devices) == 1:
            return devices[0]
        return min(devices, key=lambda d: timings[f"{kind}_{d.type}"])

    choice = DeviceChoice(pick(act, "forward"), pick(learn, "update"), timings)
    choice.reason = (
        "only the CPU is available"
        if len(devices) == 1
        else "fastest measured"
        if timings
        else "as asked"
    )
    return choice
