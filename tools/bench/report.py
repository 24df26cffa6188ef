"""Writes the bench's results as a Markdown page with one PNG plot per operator."""

from __future__ import annotations

import os
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")  # files only; no display on build or GPU hosts
import matplotlib.pyplot as plt  # noqa: E402


def _plot(op: str, rows, peers: list[str], copy_gbps: float, path: str) -> None:
    """Grouped bars per case: oprt, then each peer (no bar where it was n/a)."""
    labels = [f"{r.case}" for r in rows]
    positions = range(len(rows))
    figure, axes = plt.subplots(figsize=(max(6, 0.5 * (1 + len(peers)) * len(rows) + 2), 4))
    series = [(f"oprt ({rows[0].backend})", [r.gbps for r in rows])]
    series += [(name, [r.peers[name].gbps or 0.0 for r in rows]) for name in peers]
    width = 0.8 / len(series)
    for index, (label, values) in enumerate(series):
        offset = (index - (len(series) - 1) / 2) * width
        axes.bar([p + offset for p in positions], values, width, label=label)
    axes.axhline(copy_gbps, color="gray", linestyle="--", linewidth=1, label="device copy bandwidth")
    axes.set_xticks(list(positions), labels, rotation=60, ha="right", fontsize=7)
    axes.set_ylabel("GB/s")
    axes.set_title(op)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_report(path: str, header: str, tables, notes: list[str], results, peers: list[str],
                 copy_gbps: float) -> None:
    """path is the Markdown file; plots go beside it as <stem>_<op>.png. tables
    holds (title, header line, row lines) per text table; notes explain n/a cells."""
    directory, stem = os.path.dirname(path) or ".", os.path.splitext(os.path.basename(path))[0]
    os.makedirs(directory, exist_ok=True)
    by_op = defaultdict(list)  # one plot per op, or per op and backend when several ran
    several = len({result.backend for result in results}) > 1
    for result in results:
        by_op[f"{result.op}_{result.backend}" if several else result.op].append(result)
    lines = ["# oprt benchmark", "", header, ""]
    for title, table_header, rows_text in tables:
        if title:
            lines += [f"## {title}", ""]
        lines += ["```", table_header, *rows_text, "```", ""]
    if notes:
        lines += [f"- {note}" for note in notes] + [""]
    for op, rows in by_op.items():
        image = f"{stem}_{op}.png"
        _plot(op, rows, peers, copy_gbps, os.path.join(directory, image))
        lines += [f"![{op}]({image})", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))
