"""Side by side: the same cases from bench runs of different builds of the library.

    python3 tools/bench/compare.py plain=bench_plain.json cute=bench_cute.json

Each argument is LABEL=PATH of a file written by `bench.py --json_out`, one per
build (e.g. one GPU-runner bundle built with --@//tools/cuda:cute=off and one with
=on), or of a sweep's `sweep_<op>[_rows].json` (`bench.py --sweep`), whose points
are cases named `<rows>x<length>` (`_leading` for reductions along the leading
axis). Prints, per case found in every run, each build's µs and GB/s, each build's
time against the first one's (`x <first>` > 1: faster than the first), and
torch's µs as measured beside the first build.
"""

from __future__ import annotations

import json
import sys


def _sweep_case(point: dict) -> str:
    return f"{point['rows']}x{point['row_length']}" + ("" if point["axis"] == "last" else f"_{point['axis']}")


def load(path: str) -> dict[tuple[str, str, str, str], dict]:
    """(op, backend, dtype, case) -> that case's result (a bench run's, or a sweep
    point's): --shapes names cases by shape alone, one per dtype."""
    with open(path) as f:
        run = json.load(f)
    if "points" in run:
        return {(p["op"], run["backend"], p["dtype"], _sweep_case(p)): {**p, "case": _sweep_case(p)}
                for p in run["points"]}
    return {(r["op"], r["backend"], r["dtype"], r["case"]): r for r in run["results"]}


def table(runs: list[tuple[str, dict]]) -> list[str]:
    first_label, first = runs[0]
    op_width = max([len("op"), *(len(key[0]) for key in first)])
    header = f"{'op':<{op_width}} {'dtype':<5} {'case':<28}"
    for label, _ in runs:
        header += f" {label + ' us':>10} {label + ' GB/s':>12}"
    for label, _ in runs[1:]:
        header += f" {'x ' + first_label:>9}"
    lines = [header + f" {'torch us':>10}"]
    for key, base in first.items():
        if not all(key in results for _, results in runs):
            continue
        line = f"{key[0]:<{op_width}} {base['dtype']:<5} {base['case']:<28}"
        for _, results in runs:
            line += f" {results[key]['us']:>10.1f} {results[key]['gbps']:>12.1f}"
        for _, results in runs[1:]:
            line += f" {base['us'] / results[key]['us']:>9.2f}"
        torch_timing = base["peers"].get("torch")
        torch_us = torch_timing["us"] if torch_timing and torch_timing["us"] else None
        lines.append(line + (f" {torch_us:>10.1f}" if torch_us is not None else f" {'n/a':>10}"))
    return lines


def main(argv: list[str]) -> int:
    pairs = [arg.split("=", 1) for arg in argv[1:]]
    if len(pairs) < 2 or any(len(pair) != 2 for pair in pairs):
        print("usage: compare.py LABEL=BENCH.json LABEL=BENCH.json [...]", file=sys.stderr)
        return 2
    print("\n".join(table([(label, load(path)) for label, path in pairs])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
