"""`python -m benchmarks devices`: where PPO should act and learn (the CPU/GPU
placement post): whole `pararl train ppo` processes (`lib.compare.run_one`) per width
and placement, interleaved.
"""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Literal, get_args

from benchmarks.lib import compare, training
from benchmarks.lib import harness as h
from benchmarks.lib.compare import Comparison, Run, System
from benchmarks.lib.figures import Panel, grouped_bars
from pararl.config.saved import saved_facts

Placement = Literal["cpu-only", "gpu-only", "cpu-act-gpu-learn", "auto"]
DEVICES = {  # placement -> (--act-device, --learn-device), label
    "cpu-only": ("cpu", "cpu", "CPU only"),
    "gpu-only": ("cuda", "cuda", "GPU only"),
    "cpu-act-gpu-learn": ("cpu", "cuda", "CPU acting + GPU learning"),
    "auto": ("auto", "auto", "auto"),
}
SEED_002 = (
    "The CPU/GPU placement post (PPO on CartPole, its own machine): GPU only 2m08s, "
    "CPU only 47 s, CPU sampling + GPU training 43–45 s; CPU only fastest for 64-wide nets, "
    "CPU acting + GPU learning from 128 wide up."
)


@dataclass(frozen=True)
class Config(h.Options):
    """PPO wall time for a fixed number of env steps, per device placement and hidden
    width (the CPU/GPU placement post). --quick: widths 64 and 1024, 2,048 steps, 1 round."""

    env: str = "CartPole-v1"  # Gymnasium env id.
    total_steps: int = 20_000  # Env steps per run (the run never stops early).
    widths: tuple[int, ...] = (64, 128, 256, 1024)  # Actor's and critic's 2 hidden layers.
    placements: tuple[Placement, ...] = get_args(Placement)  # `auto`: pararl's measured choice.
    repeats: int = 3  # Rounds; every width and placement runs once per round.
    eval_episodes: int = 2  # Episodes of the one evaluation at the end of each run.
    run_timeout_s: float = 900.0  # A run is killed after this long (reported as a timeout).


def resolve(config: Config) -> Config:
    quick = {"total_steps": 2_048, "widths": (64, 1024), "repeats": 1, "eval_episodes": 1,
             "run_timeout_s": 120.0}  # fmt: skip
    c = h.apply_quick(config, quick)
    h.require(c, ">= 1: total_steps widths repeats eval_episodes", ">= 0: placements",
              "> 0: run_timeout_s")  # fmt: skip
    return c


@dataclass
class Cell:
    """One width and placement over its rounds."""

    width: int
    placement: str
    runs: int
    status: str
    note: str = ""
    wall: h.Summary | None = None
    train: h.Summary | None = None
    startup: h.Summary | None = None
    vs_cpu: float | None = None
    fastest: bool = False
    picked: str = ""  # auto: "act cpu, learn cuda"
    reason: str = ""
    timings_ms: dict[str, float] = field(default_factory=dict)


@dataclass
class Results:
    cuda: bool
    gpu: str | None
    cells: list[Cell]
    runs: list[Run]


def system(c: Config, width: int, placement: str) -> System:
    act, learn, label = DEVICES[placement]
    flags = {"hidden": (width, width), "act_device": act, "learn_device": learn}
    return System(f"w{width}-{placement}", label, "ppo", flags)


def cell(runs: list[Run], c: Config, width: int, placement: str) -> Cell:
    mine = [r for r in runs if r.system == system(c, width, placement).name]
    ok = [r for r in mine if r.ok and r.train_s is not None]
    last = mine[-1] if mine else None
    status = "ok" if ok else (last.status if last else "no CUDA")
    out = Cell(width, placement, len(mine), status, "" if ok or not last else last.note)
    out.wall = h.maybe([r.wall_s for r in ok])
    out.train = h.maybe([r.train_s for r in ok if r.train_s is not None])
    out.startup = h.maybe([r.wall_s - r.train_s for r in ok if r.train_s is not None])
    if ok and placement == "auto":
        devices = ok[-1].extra.get("devices") or {}
        out.picked = f"act {devices.get('act')}, learn {devices.get('learn')}"
        out.reason, out.timings_ms = devices.get("reason") or "", devices.get("timings_ms") or {}
    return out


def measure(c: Config, meta: h.Metadata) -> Results:
    """Every (width, placement) once per round, interleaved; GPU ones only with CUDA; a
    placement that fails is not run again."""
    import torch

    cuda = bool(torch.cuda.is_available())
    gpu = torch.cuda.get_device_name(0) if cuda else None
    row = Comparison("devices", "", (), (), c.total_steps, c.total_steps)  # no early stop
    options = SimpleNamespace(budget=c.total_steps, eval_every=c.total_steps,
                              eval_episodes=c.eval_episodes, run_timeout_s=c.run_timeout_s,
                              sb3_threads=0, verify_episodes=1)  # fmt: skip
    runs: list[Run] = []

    def task(width: int, placement: str, workdir: Path) -> float:
        s = system(c, width, placement)
        round_ = 1 + sum(r.system == s.name for r in runs)
        h.progress(f"devices: width {width}, {placement}, round {round_} ...")
        where = workdir / f"round{round_}"  # the runs of a round in a folder of their own
        where.mkdir(exist_ok=True)
        runs.append(run := compare.run_one(row, options, s, c.env, 0, where))
        run.extra["devices"] = saved_facts(compare.directory(where, s.name, c.env, 0)).get(
            "devices"
        )
        h.progress(f"devices: width {width}, {placement}: {run.status}, {run.wall_s:.1f} s")
        if not run.ok:
            raise RuntimeError(run.note or run.status)
        return run.wall_s

    def failed(name: str, exc: Exception) -> None:
        h.progress(f"devices: {name} failed, not run again: {exc}")

    runnable = [p for p in c.placements if cuda or "cuda" not in DEVICES[p]]
    with tempfile.TemporaryDirectory(prefix="pararl-bench-devices-") as tmp:
        training.warm_up(Path(tmp))
        tasks = {f"{w}/{p}": functools.partial(task, w, p, Path(tmp))
                 for w in c.widths for p in runnable}  # fmt: skip
        h.interleaved(tasks, c.repeats, failed)
    cells = []
    for width in c.widths:
        mine = [cell(runs, c, width, p) for p in c.placements]
        cpu = next((x.wall for x in mine if x.placement == "cpu-only"), None)
        timed = [x for x in mine if x.wall and x.placement != "auto"]
        for x in mine:
            x.vs_cpu = h.ratio(x.wall, cpu)
            x.fastest = bool(timed) and x is min(timed, key=lambda y: h.med(y.wall) or 0.0)
        cells += mine
    if gpu:
        meta.machine_note = f"; GPU: {gpu}"
    return Results(cuda, gpu, cells, runs)


def label(x: Cell) -> str:
    return DEVICES[x.placement][2]


PLACEMENTS: list[h.Col[Cell]] = [
    h.Col("width", lambda x: x.width),
    h.Col("placement", lambda x: label(x) + (" ★" if x.fastest else ""), "l"),
    h.Col("wall s, median (min–max)", lambda x: h.fmt_spread(x.wall, h.fmt_num) if x.wall
          else x.status + f" ({x.note})" * bool(x.note)),
    h.Col("trainer s", lambda x: h.fmt_num(h.med(x.train))),
    h.Col("start-up s", lambda x: h.fmt_num(h.med(x.startup))),
    h.Col("÷ CPU only", lambda x: h.fmt_ratio(x.vs_cpu) if x.wall else "–"),
    h.Col("auto picked", lambda x: x.picked, "l"),
]  # fmt: skip
AUTO: list[h.Col[Cell]] = [
    h.Col("width", lambda x: x.width),
    h.Col("auto picked", lambda x: x.picked or "–", "l"),
    h.Col("why", lambda x: x.reason or "–", "l"),
    h.Col("start-up timings (ms)", lambda x: ", ".join(
        f"{k} {v:.3g}" for k, v in sorted(x.timings_ms.items())) or "none (no choice)", "l"),
]  # fmt: skip


def report(r: Results, meta: h.Metadata) -> h.Report:
    p = meta.params
    notes = (
        f"`pararl train ppo --env {p['env']}` for {p['total_steps']:,} env steps (no early stop, "
        f"one {p['eval_episodes']}-episode evaluation at the end, no TensorBoard), MLPs of "
        "2 hidden layers of each width; whole processes, launch to exit; "
        f"{p['repeats']} interleaved round(s). Trainer s: the run's own clock (from after the "
        "device choice); start-up s = wall − trainer. ★: fastest placement. "
        + (f"GPU: {r.gpu}. " if r.gpu else "No CUDA here: GPU placements not run. ")
        + SEED_002
    )
    blocks = [f"### PPO wall time by device placement\n\n{notes}\n\n{h.table(PLACEMENTS, r.cells)}"]
    autos = [x for x in r.cells if x.placement == "auto"]
    if autos:
        blocks.append(
            "What `--act-device auto --learn-device auto` chose, and the timings it chose on (one "
            "forward at the sampling batch, one update at the minibatch size, per device; from "
            f"each run's config.json):\n\n{h.table(AUTO, autos)}"
        )
    ratios = []
    for width in dict.fromkeys(x.width for x in r.cells):
        mine = {x.placement: x for x in r.cells if x.width == width}
        fastest = next((label(x) for x in mine.values() if x.fastest), "–")
        gpus = [f"{label(x)} {h.fmt_ratio(x.vs_cpu)}" for x in mine.values()
                if "gpu" in x.placement and x.vs_cpu]  # fmt: skip
        text = f"width {width}: fastest {fastest}" + (
            f" (÷ CPU only: {', '.join(gpus)})" if gpus else ""
        )
        ratios.append(
            text + (f", auto picked {mine['auto'].picked or '–'}" if "auto" in mine else "")
        )
    if not r.cuda:
        ratios.append("no CUDA: GPU placements not measured")
    series, texts = grouped_bars({
        DEVICES[name][2]: [x.wall or x.status for x in r.cells if x.placement == name]
        for name in dict.fromkeys(x.placement for x in r.cells)
    })  # fmt: skip
    widths = [(i, f"{w} wide") for i, w in enumerate(dict.fromkeys(x.width for x in r.cells))]
    panel = Panel(f"PPO {p['env']}, {p['total_steps']:,} env steps", series,
                  ylabel="wall time, launch to exit (s): median, min–max", xticks=widths,
                  texts=texts)  # fmt: skip
    return h.Report(
        f"PPO device placement: where to act, where to learn (`{h.PROG} devices`)",
        "; ".join(ratios),
        blocks,
        [panel],
        "device placement benchmark",
    )
