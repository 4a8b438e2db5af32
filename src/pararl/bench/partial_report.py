"""Tables, key ratios, plot and BENCHMARKS.md section of `pararl bench partial`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pararl.bench.common import Summary, markdown_table
from pararl.bench.publish import new_figure, save_figure, section_header
from pararl.samplers.auto import Auto

SEED_ROWS = [
    ["seeds/001", "8 × 20 (160)", "timeout=0.0001 vs wait (0.1 s)", "wait as fast or faster"],
    [
        "seeds/001",
        "8 × 4000 (32,000)",
        "timeout=0.0001 vs wait (0.1 s)",
        "314 s vs 342 s / 1000 it.",
    ],
]


def cell(
    per_iteration: Summary, stats: list[dict[str, Any]], length: int, auto: Auto | None
) -> dict[str, Any]:
    """One recv policy in one case: time per iteration and how it batched."""
    out: dict[str, Any] = {
        "s_per_iteration": per_iteration.as_dict(),
        "mean_workers_per_recv": float(np.mean([s["mean_workers_per_recv"] for s in stats])),
        "forwards_per_iteration": float(np.mean([s["forward_passes"] for s in stats])) / length,
        "forward_share": float(np.mean([s["forward_s"] / s["wall_s"] for s in stats])),
    }
    if auto is not None:
        out["auto"] = auto.summary()
    return out


def spread(summary: dict[str, Any]) -> float:
    """(max - min) / median of a cell's repeats."""
    return (summary["max"] - summary["min"]) / summary["median"] if summary["median"] else 0.0


def _best_fixed(case: dict[str, Any]) -> tuple[str, float] | None:
    fixed = {n: c["s_per_iteration"]["median"] for n, c in case["policies"].items() if n != "auto"}
    return min(fixed.items(), key=lambda kv: kv[1]) if fixed else None


def auto_ratio(case: dict[str, Any]) -> float | None:
    best = _best_fixed(case)
    if best is None or "auto" not in case["policies"]:
        return None
    return case["policies"]["auto"]["s_per_iteration"]["median"] / best[1]


def key_ratios(cases: Sequence[dict[str, Any]]) -> str:
    parts = []
    ratios = [r for r in (auto_ratio(c) for c in cases) if r is not None]
    if ratios:
        within = sum(r <= 1.1 for r in ratios)
        spreads = [spread(p["s_per_iteration"]) for c in cases for p in c["policies"].values()]
        parts.append(
            f"auto / best fixed policy: worst {max(ratios):.3f}, median {np.median(ratios):.3f}, "
            f"within 1.10 in {within} of {len(ratios)} cases (median spread of a cell's "
            f"repeats {np.median(spreads):.0%})"
        )
    for case in cases:
        policies = case["policies"]
        if "all" in policies and "timeout=0.0001" in policies:
            ratio = (
                policies["timeout=0.0001"]["s_per_iteration"]["median"]
                / policies["all"]["s_per_iteration"]["median"]
            )
            parts.append(
                f"timeout=1e-4 / wait-all at {case['envs_per_worker']} envs/worker, "
                f"hidden {'x'.join(map(str, case['hidden']))}: {ratio:.3f}"
            )
    return "; ".join(parts) or "none"


def _auto_note(c: dict[str, Any], warmups: int | None) -> str:
    info = c.get("auto")
    if not info:
        return ""
    ratio = info.get("trial_partial_vs_wait")
    trial = "no trial" if ratio is None else f"trial partial/wait {ratio:.2f}x"
    settled = "" if warmups is None else f", {warmups} warm-up samples"
    return f"{info['mode']} ({trial}{settled})"


def tables(cases: Sequence[dict[str, Any]]) -> list[str]:
    """One table per policy size: every envs-per-worker value and recv policy."""
    out = []
    for hidden in sorted({tuple(c["hidden"]) for c in cases}):
        rows = []
        for case in (c for c in cases if tuple(c["hidden"]) == hidden):
            best = _best_fixed(case)
            auto_info = case["policies"].get("auto", {}).get("auto") or {}
            mean, cv = auto_info.get("step_mean_s"), auto_info.get("step_cv")
            for name, c in case["policies"].items():
                t = c["s_per_iteration"]
                rel = t["median"] / best[1] if best else None
                rows.append(
                    [
                        case["envs_per_worker"],
                        case["num_envs"],
                        case["episode_length"],
                        name + (" (best fixed)" if best and name == best[0] else ""),
                        f"{t['median'] * 1e3:.2f} ({t['min'] * 1e3:.2f}–{t['max'] * 1e3:.2f})",
                        f"{spread(t):.0%} / {len(t['samples'])}",
                        "" if rel is None else f"{rel:.3f}",
                        f"{c['mean_workers_per_recv']:.2f}",
                        f"{c['forwards_per_iteration']:.2f}",
                        f"{c['forward_share']:.0%}",
                        "" if mean is None else f"{mean * 1e3:.2f}",
                        "" if cv is None else f"{cv:.2f}",
                        "" if case["rss_per_env_mb"] is None else f"{case['rss_per_env_mb']:.2f}",
                        _auto_note(c, case.get("auto_warmup_samples", {}).get(name)),
                    ]
                )
        header = [
            "envs/worker",
            "envs",
            "L",
            "recv",
            "ms / iteration: median (min–max)",
            "spread / repeats",
            "vs best fixed",
            "workers / recv",
            "forwards / iteration",
            "forward share",
            "worker step ms",
            "step CV",
            "RSS MB / env",
            "auto",
        ]
        title = f"### policy hidden {'x'.join(map(str, hidden))}\n\n"
        out.append(title + markdown_table(header, rows, "rrrlrrrrrrrrrl"))
    return out


def plot(data: dict[str, Any], path: Path) -> Path | None:
    """Time per iteration relative to wait-all, per envs per worker; one panel per size."""
    cases = data["cases"]
    sizes = sorted({tuple(c["hidden"]) for c in cases})
    if not sizes:
        return None
    fig, axes = new_figure(len(sizes))
    for ax, hidden in zip(axes, sizes, strict=True):
        mine = [c for c in cases if tuple(c["hidden"]) == hidden]
        x = [c["envs_per_worker"] for c in mine]
        for i, name in enumerate(mine[0]["policies"]):
            y = [
                c["policies"][name]["s_per_iteration"]["median"]
                / c["policies"].get("all", c["policies"][name])["s_per_iteration"]["median"]
                for c in mine
            ]
            style = "-o" if name in ("all", "auto") else "--."
            ax.plot(x, y, style, label=name, color=f"C{i}", linewidth=2 if name == "auto" else 1)
        ax.set_xscale("log")
        ax.set_xlabel("envs per worker")
        ax.set_ylabel("time per iteration / wait-all")
        ax.set_title(f"{data['metadata']['params']['env']}, hidden {'x'.join(map(str, hidden))}")
        ax.axhline(1.0, color="grey", linewidth=0.5)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return save_figure(fig, path)


def markdown_section(data: dict[str, Any], tables_: Sequence[str], figure_link: str | None) -> str:
    title = (
        "Partial collection: wait for all vs timeout vs min_envs vs auto (`pararl bench partial`)"
    )
    lines = [section_header(title, data["metadata"], data["key_ratios"]), ""]
    lines += [
        "The seed's numbers (8 workers, HalfCheetahDir, GPU policy; not re-measured here):",
        "",
        markdown_table(["source", "workers × envs", "compared", "result"], SEED_ROWS, "llll"),
        "",
    ]
    if figure_link:
        lines += [f"![partial collection benchmark]({figure_link})", ""]
    return "\n".join(lines) + "\n" + "\n\n".join(tables_)
