"""Writes the bench's results as a Markdown page with one PNG plot per operator:
GB/s against bytes moved, a line per backend and peer.

    python3 tools/bench/report.py bench.json docs/performance/performance

redraws the plots of a run saved with --json_out (as docs/performance.md's are).
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")  # files only; no display on build or GPU hosts
import matplotlib.pyplot as plt  # noqa: E402


_DTYPE_MARKERS = {"f32": "o", "f16": "s", "bf16": "^"}


def _series(rows, peers: list[str]) -> dict[tuple[str, str], dict[str, tuple[int, float]]]:
    """(source, dtype) -> case -> (bytes, GB/s); a source is an oprt backend or a peer.
    Peers are timed beside every backend's row; the first timing of a case is kept."""
    series: dict[tuple[str, str], dict[str, tuple[int, float]]] = defaultdict(dict)
    for r in rows:
        series[(r.backend, r.dtype)][r.case] = (r.bytes, r.gbps)
        for name in peers:
            timing = r.peers.get(name)
            if timing is not None and timing.gbps:
                series[(name, r.dtype)].setdefault(r.case, (r.bytes, timing.gbps))
    return series


def _plot(op: str, rows, peers: list[str], copy_gbps: float, path: str) -> None:
    """GB/s against the bytes a case moves: a colour per backend and peer, a marker per dtype."""
    series = _series(rows, peers)
    sources = list(dict.fromkeys(source for source, _ in series))
    colours = {source: f"C{index}" for index, source in enumerate(sources)}
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for (source, dtype), cases in series.items():
        points = sorted(cases.values())
        axes.plot([b / 1e6 for b, _ in points], [g for _, g in points], color=colours[source],
                  marker=_DTYPE_MARKERS.get(dtype, "x"), linewidth=1, label=f"{source} {dtype}")
    axes.axhline(copy_gbps, color="gray", linestyle="--", linewidth=1, label="device copy bandwidth")
    axes.set_xscale("log")
    save_plot(figure, axes, "MB moved per call (log)", op, path)


def save_plot(figure, axes, xlabel: str, title: str, path: str) -> None:
    """Labels a GB/s plot the bench's way (legend, layout, resolution), writes it to path, closes it."""
    axes.set_xlabel(xlabel)
    axes.set_ylabel("GB/s")
    axes.set_title(title)
    axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_report(path: str, header: str, tables, notes: list[str], results, peers: list[str],
                 copy_gbps: float) -> None:
    """path is the Markdown file; plots go beside it as <stem>_<op>.png. tables
    holds (title, header line, row lines) per text table; notes explain n/a cells."""
    directory, stem = os.path.dirname(path) or ".", os.path.splitext(os.path.basename(path))[0]
    os.makedirs(directory, exist_ok=True)
    by_op = defaultdict(list)  # one plot per op, every backend and peer in it
    for result in results:
        by_op[result.op].append(result)
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


def plot_saved_run(json_path: str, prefix: str) -> list[str]:
    """Redraws the plots of a run saved with --json_out as <prefix>_<op>.png; returns their paths."""
    with open(json_path) as f:
        run = json.load(f)

    def timing(fields):
        return SimpleNamespace(**fields) if fields is not None else None

    by_op = defaultdict(list)
    for fields in run["results"]:
        peers = {name: timing(value) for name, value in fields["peers"].items()}
        by_op[fields["op"]].append(SimpleNamespace(**{**fields, "peers": peers}))
    paths = []
    for op, rows in by_op.items():
        paths.append(f"{prefix}_{op}.png")
        _plot(op, rows, run["peers"], run["copy_gbps"], paths[-1])
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: report.py BENCH.json PREFIX  (writes PREFIX_<op>.png per operator)")
    print("\n".join(plot_saved_run(sys.argv[1], sys.argv[2])))
