"""Writes the bench's results as a Markdown page with one PNG plot per operator."""

from __future__ import annotations

import os
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")  # files only; no display on build or GPU hosts
import matplotlib.pyplot as plt  # noqa: E402


def _plot(op: str, rows, copy_gbps: float, path: str) -> None:
    labels = [f"{r.case}" for r in rows]
    positions = range(len(rows))
    figure, axes = plt.subplots(figsize=(max(6, 0.5 * len(rows) + 2), 4))
    width = 0.4
    axes.bar([p - width / 2 for p in positions], [r.gbps for r in rows], width, label=f"oprt ({rows[0].backend})")
    axes.bar([p + width / 2 for p in positions], [r.peer_gbps for r in rows], width, label="torch")
    axes.axhline(copy_gbps, color="gray", linestyle="--", linewidth=1, label="device copy bandwidth")
    axes.set_xticks(list(positions), labels, rotation=60, ha="right", fontsize=7)
    axes.set_ylabel("GB/s")
    axes.set_title(op)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_report(path: str, header: str, table_header: str, rows_text: list[str], results, copy_gbps: float) -> None:
    """path is the Markdown file; plots go beside it as <stem>_<op>.png."""
    directory, stem = os.path.dirname(path) or ".", os.path.splitext(os.path.basename(path))[0]
    os.makedirs(directory, exist_ok=True)
    by_op = defaultdict(list)
    for result in results:
        by_op[result.op].append(result)
    lines = ["# oprt benchmark", "", header, "", "```", table_header, *rows_text, "```", ""]
    for op, rows in by_op.items():
        image = f"{stem}_{op}.png"
        _plot(op, rows, copy_gbps, os.path.join(directory, image))
        lines += [f"![{op}]({image})", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))
