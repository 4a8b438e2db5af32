"""Tables, key ratios, the plot and the BENCHMARKS.md section of `pararl bench ppo`.

Every function takes the JSON-ready dicts the measuring parts return, so a report
can be rebuilt from `ppo.json` alone. The solve part's table and panel are the DQN
benchmark's (`dqn_report`), with the PPO systems' names.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pararl.bench.common import fmt_rate, fmt_ratio, markdown_table
from pararl.bench.dqn_report import plot_solve, solve_tables
from pararl.bench.publish import new_figure, save_figure, section_header

SYSTEM_LABELS = {
    "pararl": "pararl PPO (defaults)",
    "pararl-serial": "pararl PPO serial",
    "pararl-sync": "pararl PPO sync",
    "sb3": "SB3 PPO (zoo)",
}
VARIANT_LABELS = {"single": "plain (all workers, then act)", "double": "double-buffered"}


def policy_name(hidden: Sequence[int]) -> str:
    return "x".join(str(w) for w in hidden)


def _range(rate: dict[str, Any] | None) -> str:
    return "–" if rate is None else f"{fmt_rate(rate['min'])}–{fmt_rate(rate['max'])}"


def _variant_cell(variant: dict[str, Any]) -> str:
    rate = variant["steps_per_s"]
    if rate is None:
        return variant["status"]
    return f"{fmt_rate(rate['median'])} ({_range(rate)})"


def sampling_table(cases: list[dict[str, Any]], settings: dict[str, Any]) -> str:
    rows = []
    for case in cases:
        v = case["variants"]
        rows.append(
            [
                case["env"],
                f"{policy_name(case['hidden'])} ({fmt_rate(case['num_params'])} params)",
                f"{case['forward_full_ms']:.2f} / {case['forward_group_ms']:.2f}",
                f"{case['env_step_ms']:.2f}",
                _variant_cell(v["single"]),
                _variant_cell(v["double"]),
                fmt_ratio(case["double_over_single"]),
            ]
        )
    table = markdown_table(
        [
            "env",
            "policy",
            "forward ms, all / one group",
            "env step ms",
            "plain steps/s (min–max)",
            "double-buffered steps/s (min–max)",
            "double ÷ plain",
        ],
        rows,
        align="llrrrrr",
    )
    notes_lines = [
        f"Env steps/s of rollout collection alone (no update): {settings['workers']} workers "
        f"× {settings['envs_per_worker']} envs, rollouts of {settings['num_steps']} steps "
        f"per env, acting on {settings['act_device']}; {settings['repeats']} interleaved "
        f"spells of {settings['rollouts']} rollouts after {settings['warmup']} untimed. "
        f"pararl/StepCost-v0 burns {settings['step_cost_us']:g} µs of CPU per step.",
        "The forward and env-step columns (one policy forward; one vector step of the "
        "envs alone, random actions) say how much there is to overlap: double-buffering "
        "hides at most the shorter of a group's forward and a group's step, and only when "
        "a core is free for each.",
    ]
    notes = " ".join(notes_lines)
    missing = [c for c in cases if c["variants"]["double"]["status"] != "ok"]
    if missing:
        notes += f" Double-buffered: {missing[0]['variants']['double']['note'] or 'failed'}."
    return f"### Sampling throughput: double-buffering off and on\n\n{notes}\n\n{table}"


def key_ratios(data: dict[str, Any]) -> str:
    parts = []
    if "solve" in data:
        ratios = data["solve"]["ratio_to_sb3"]
        labels = data["solve"].get("labels", {})
        text = ", ".join(
            f"{labels.get(k, k)} {fmt_ratio(v) if v is not None else 'not solved'}"
            for k, v in ratios.items()
        )
        parts.append(f"PPO time to solve ÷ SB3 (target ≤ 0.5): {text}")
    if "double_buffer" in data:
        text = ", ".join(
            f"{c['env']} {policy_name(c['hidden'])} "
            + (fmt_ratio(c["double_over_single"]) if c["double_over_single"] else "–")
            for c in data["double_buffer"]
        )
        parts.append(f"double-buffered ÷ plain sampling: {text}")
    return "; ".join(parts)


def markdown_section(data: dict[str, Any], tables: Sequence[str], figure_link: str | None) -> str:
    title = "PPO: time to solve against SB3, double-buffered sampling (`pararl bench ppo`)"
    lines = [section_header(title, data["metadata"], data["key_ratios"]), ""]
    if figure_link:
        lines += [f"![PPO benchmark]({figure_link})", ""]
    return "\n".join(lines) + "\n" + "\n\n".join(tables)


def tables(data: dict[str, Any]) -> list[str]:
    out = []
    if "solve" in data:
        out.append(solve_tables(data["solve"]))
    if "double_buffer" in data:
        out.append(sampling_table(data["double_buffer"], data["double_buffer_settings"]))
    return out


# --- the figure ---------------------------------------------------------------------


def plot_sampling(ax: Any, cases: list[dict[str, Any]]) -> None:
    width = 0.38
    for i, (variant, color) in enumerate((("single", "C0"), ("double", "C1"))):
        xs, med, lo, hi = [], [], [], []
        for x, case in enumerate(cases):
            rate = case["variants"][variant]["steps_per_s"]
            if rate is None:
                continue
            xs.append(x + (i - 0.5) * width)
            med.append(rate["median"])
            lo.append(rate["median"] - rate["min"])
            hi.append(rate["max"] - rate["median"])
        ax.bar(xs, med, width, yerr=[lo, hi], capsize=3, color=color, label=VARIANT_LABELS[variant])
    for x, case in enumerate(cases):
        ratio = case["double_over_single"]
        single = case["variants"]["single"]["steps_per_s"]
        if ratio is not None and single is not None:
            ax.annotate(fmt_ratio(ratio), (x, single["max"]), ha="center", fontsize=7)
    names = [f"{c['env'].split('/')[-1]}\n{policy_name(c['hidden'])}" for c in cases]
    ax.set_xticks(range(len(cases)), names, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("env steps / s, collection only (median, min–max)")
    ax.set_title("PPO sampling: double-buffering off / on")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", which="both", alpha=0.3)


def plot(data: dict[str, Any], path: Path) -> Path | None:
    """One panel per part that ran."""
    panels = [
        (key, fn)
        for key, fn in (("solve", plot_solve), ("double_buffer", plot_sampling))
        if data.get(key)
    ]
    if not panels:
        return None
    fig, axes = new_figure(len(panels))
    for ax, (key, fn) in zip(axes, panels, strict=True):
        fn(ax, data[key])
    return save_figure(fig, path)
