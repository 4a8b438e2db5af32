"""One gradient step as one program: `torch.compile`, and on a GPU a recorded CUDA graph.

A learner writes its step once, as a function of tensors that runs the forward pass,
the backward pass and the optimizer (a capturable flat optimizer, `pararl.optim`) and
returns tensors. `FusedStep` runs that one function in one of four ways, so the fast
paths and the plain one share their math line for line:

- `eager`: as written, op by op;
- `compile`: through `torch.compile` (inductor): fused kernels and less Python per op.
  Dynamo stops its graph at the backward call, so this is two compiled programs: the
  forward pass and loss (with the backward AOT autograd derives from them), then the
  optimizer. Tracing the backward too (`torch._dynamo.config.trace_autograd_ops`,
  torch 2.13) compiled slower and no longer matched the plain step in the tests;
- `graph` (CUDA only): the step's kernels are recorded once into a CUDA graph and
  replayed for every later step, with the new batch copied into the recorded inputs.
  A small network's step is hundreds of tiny kernels whose launches cost more than
  their arithmetic; a replay launches them all at once (LeanRL's speed-ups come from
  this and compile);
- `compile+graph`: the compiled step, recorded.

What a step may do to be recorded: no host synchronisation (`.item()`, `.cpu()`,
Python branches on tensor values), no Python numbers that change between steps (the
optimizer's step count and learning rate live in device tensors), inputs of fixed
shapes. Randomness, if any, is drawn outside the step.

The first `warmup` calls of a recorded step run as they are, on a side stream (the
CUDA caching allocator and cuBLAS need that before a capture); each is a real step.
The recording itself executes nothing, so the call that records also replays once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, Literal, TypeVar, get_args

import torch

# what `compile` compiles with; the tests' exactness checks of the traced step use
# "aot_eager" (the same graph capture and autograd, without generating kernels), which
# takes seconds where inductor takes tens of them on a small CPU
BACKEND = "inductor"
StepMode = Literal["eager", "compile", "graph", "compile+graph"]
K = TypeVar("K")  # what tells a learner's step variants apart
MODES: tuple[StepMode, ...] = get_args(StepMode)
StepFn = Callable[..., tuple[torch.Tensor, ...]]
Input = torch.Tensor | float | dict[str, torch.Tensor]  # a dict: a Dict observation's leaves


class FusedStep:
    """`fn(*tensors) -> tuple of tensors`, run eagerly, compiled and/or recorded as a
    CUDA graph (`mode`). `setup_s`: the seconds the first calls took beyond a plain
    step (compiling, recording), so that a benchmark can keep them apart."""

    def __init__(self, fn: StepFn, mode: StepMode, device: torch.device, warmup: int = 3) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown step mode {mode!r}; one of {', '.join(MODES)}")
        if "graph" in mode and device.type != "cuda":
            raise ValueError(f"a CUDA graph needs a CUDA device, not {device}")
        self.mode, self.device, self.warmup = mode, device, warmup
        self.fn: StepFn = fn
        if "compile" in mode:
            self.fn = torch.compile(fn, backend=BACKEND, dynamic=False, options=_options(device))
        self.calls = 0
        self.setup_s = 0.0
        self._graph: torch.cuda.CUDAGraph | None = None
        self._inputs: list[torch.Tensor] = []
        self._outputs: tuple[torch.Tensor, ...] = ()

    def __call__(self, *inputs: Input) -> tuple[torch.Tensor, ...]:
        """One step on `inputs` (tensors, or dicts of tensors: a Dict observation's
        leaves; a Python number only in `eager` mode, where nothing is traced or
        recorded)."""
        self.calls += 1
        if "graph" not in self.mode:
            if self.mode == "eager" or self.calls > 1:
                return self.fn(*inputs)
            start = time.perf_counter()  # the first compiled call compiles
            out = self.fn(*inputs)
            self.setup_s += time.perf_counter() - start
            return out
        if self._graph is None:
            start = time.perf_counter()
            out = self._warm(inputs) if self.calls <= self.warmup else self._record(inputs)
            torch.cuda.synchronize(self.device)
            self.setup_s += time.perf_counter() - start
            return out
        for recorded, given in zip(self._inputs, _tensors(inputs), strict=True):
            recorded.copy_(given, non_blocking=True)
        self._graph.replay()
        # the recorded outputs are overwritten by the next replay: hand out copies
        return tuple(out.clone() for out in self._outputs)

    def _warm(self, inputs: tuple[Input, ...]) -> tuple[torch.Tensor, ...]:
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            out = self.fn(*inputs)
        torch.cuda.current_stream(self.device).wait_stream(side)
        return out

    def _record(self, inputs: tuple[Input, ...]) -> tuple[torch.Tensor, ...]:
        recorded = [_to(x, self.device) for x in inputs]
        self._inputs = list(_tensors(recorded))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._outputs = self.fn(*recorded)
        self._graph = graph
        graph.replay()  # recording ran nothing: this is the call's step
        return tuple(out.clone() for out in self._outputs)


def _to(x: Input, device: torch.device) -> torch.Tensor | dict[str, torch.Tensor]:
    """A recorded input: a copy on `device` of a tensor, or of each tensor of a dict."""
    if isinstance(x, dict):
        return {k: v.to(device, copy=True) for k, v in x.items()}
    return torch.as_tensor(x).to(device, copy=True)


def _tensors(inputs: Sequence[Input]) -> Iterator[torch.Tensor]:
    """The tensors of a step's inputs in order, a dict's by its keys' order."""
    for x in inputs:
        if isinstance(x, dict):
            yield from x.values()
        else:
            yield torch.as_tensor(x)


class FusedSteps(Generic[K]):
    """A learner's fused steps, one per variant of its update (with importance weights
    or not, ...), each made at its first use, in `mode` on `device`."""

    def __init__(self, mode: StepMode, device: torch.device) -> None:
        self.mode, self.device = mode, device
        self._steps: dict[K, FusedStep] = {}

    def get(self, key: K, fn: Callable[[], StepFn]) -> FusedStep:
        """The step of variant `key`, made from `fn()` the first time."""
        step = self._steps.get(key)
        if step is None:
            step = self._steps[key] = FusedStep(fn(), self.mode, self.device)
        return step

    @property
    def setup_s(self) -> float:
        """The seconds all of them took so far beyond plain steps (compiling,
        recording): a benchmark keeps them apart, a thread governor leaves them out."""
        return sum(step.setup_s for step in self._steps.values())

    def stopwatch(self) -> Callable[[], float]:
        """A clock started now of the steps' own time: the seconds since, less what
        compiling and recording took in them (a first compiled call is no measure of
        how fast the updates run)."""
        setup, start = self.setup_s, time.perf_counter()
        return lambda: time.perf_counter() - start - (self.setup_s - setup)


def _options(device: torch.device) -> dict[str, Any] | None:
    """Inductor's options for a step on `device`. On a CPU with several threads, its
    kernels read the thread count when they run instead of having the count at
    compile time built in (`cpp.dynamic_threads`): a learner that drops to one thread
    while something else takes the cores (`pararl.mp.threads.AdaptiveThreads`) then
    needs no second compile."""
    if BACKEND != "inductor" or device.type != "cpu" or torch.get_num_threads() == 1:
        return None
    return {"cpp.dynamic_threads": True}


def program_boundary() -> None:
    """End the compiled program here and start another (nothing when the step runs as
    written or is only recorded). An optimizer's step changes its parameters in place
    through their flat vector (`pararl.optim`), and AOT autograd refuses one program
    that both changes the vector and reads the parameters as views of it: a step that
    runs a network again after stepping its optimizer (SAC's actor loss reads the
    critics just updated) puts a boundary in between."""
    if torch.compiler.is_compiling():
        import torch._dynamo as dynamo  # loaded already: this runs inside a compilation

        dynamo.graph_break()


def resolve_step_mode(setting: str, device: torch.device, compile_pays: bool = False) -> StepMode:
    """The step mode for `--compile auto|on|off` on `device`: `off` runs the step as
    written; `on` compiles it, and on a GPU also records it; `auto` compiles it only
    where the algorithm says compiling repays its cost at the run's budget
    (`compile_pays`; SAC's step over a long run), and otherwise records it on a GPU
    (recording costs milliseconds and the replay removes the launches that bound a
    small network's step there) and runs it as written on the CPU: compiling took
    longer than it saved at the budgets measured (BENCHMARKS.md, learner)."""
    cuda = device.type == "cuda"
    if setting == "off":
        return "eager"
    if setting == "on" or (setting == "auto" and compile_pays):
        return "compile+graph" if cuda else "compile"
    if setting == "auto":
        return "graph" if cuda else "eager"
    raise ValueError(f"--compile must be auto, on or off, not {setting!r}")


__all__ = [
    "MODES",
    "FusedStep",
    "FusedSteps",
    "StepFn",
    "StepMode",
    "program_boundary",
    "resolve_step_mode",
]
