"""The bench's offline tools on a saved run: compare.py's side-by-side table,
report.py's plots redrawn from JSON, and the overhead target's verdict."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import unittest
from types import SimpleNamespace

from tools.bench import compare, report, targets


def _result(op: str, case: str, us: float, torch_us: float | None) -> dict:
    gbps = 1e3 / us
    torch = {"us": torch_us, "gbps": 1e3 / torch_us, "ratio": torch_us / us, "unavailable": None} \
        if torch_us is not None else {"us": None, "gbps": None, "ratio": None, "unavailable": "no"}
    return {"op": op, "case": case, "dtype": "f32", "shapes": "1024", "backend": "nvidia", "us": us,
            "bytes": 10**6, "flops": 0, "gbps": gbps, "pct_copy_bw": 50.0, "peers": {"torch": torch}}


def _run(results: list[dict]) -> dict:
    return {"device": "test", "backend": "nvidia", "copy_gbps": 1000.0, "peers": ["torch"],
            "results": results, "overhead": [], "driver_launch_us": 4.0}


class BenchToolsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.directory = tempfile.mkdtemp()
        self.plain = os.path.join(self.directory, "plain.json")
        self.cute = os.path.join(self.directory, "cute.json")
        with open(self.plain, "w") as f:
            json.dump(_run([_result("copy", "2p20_f32", 10.0, 12.0), _result("copy", "only_plain", 5.0, None)]), f)
        with open(self.cute, "w") as f:
            json.dump(_run([_result("copy", "2p20_f32", 8.0, 11.0)]), f)

    def test_compare_joins_cases_present_in_every_run(self) -> None:
        lines = compare.table([("plain", compare.load(self.plain)), ("cute", compare.load(self.cute))])
        self.assertEqual(len(lines), 2, lines)  # header and the one shared case
        self.assertIn("x plain", lines[0])
        fields = lines[1].split()
        self.assertEqual(fields[:3], ["copy", "f32", "2p20_f32"])
        self.assertEqual(fields[3:7], ["10.0", "100.0", "8.0", "125.0"])
        self.assertEqual(fields[7], "1.25")  # plain's time over cute's
        self.assertEqual(fields[8], "12.0")  # torch beside the first run

    def test_compare_needs_two_labelled_runs(self) -> None:
        self.assertEqual(compare.main(["compare.py", f"plain={self.plain}"]), 2)
        self.assertEqual(compare.main(["compare.py", self.plain, self.cute]), 2)

    def test_plots_are_redrawn_from_a_saved_run(self) -> None:
        paths = report.plot_saved_run(self.plain, os.path.join(self.directory, "run"))
        self.assertEqual(paths, [os.path.join(self.directory, "run_copy.png")])
        with open(paths[0], "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_overhead_verdicts_per_backend(self) -> None:
        nvidia = SimpleNamespace(op="copy", backend="nvidia", run_us=4.6, op_call_us=5.4, op_us=7.0,
                                 peers={"torch": 5.6}, torch_writes_out=False)
        cpu = SimpleNamespace(op="relu", backend="cpu", run_us=1.0, op_call_us=2.5, op_us=3.0,
                              peers={"torch": 3.0}, torch_writes_out=False)
        writes = SimpleNamespace(op="copy", backend="cpu", run_us=1.0, op_call_us=1.5, op_us=9.0,
                                 peers={"torch": 1.4}, torch_writes_out=True)
        lines = [v.line() for v in targets.overhead_targets([nvidia, cpu, writes], 4.5)]
        self.assertEqual(lines, [
            "PASS  cpu: ort.<op> host time <= 1.2x torch's call of the same form (op_() against an "
            "out= or copy_ peer, op() against an allocating one): 2 ops; worst copy op_() 1.5 us "
            "against torch's 1.4 us (1.07x)",
            "FAIL  cpu: ort.<op>_() <= p.run() + 1.0 us: 2 ops; worst relu op_() 2.5 us, p.run() 1.0 us",
            "FAIL  nvidia: ort.<op> host time <= 1.2x torch's call of the same form (op_() against an "
            "out= or copy_ peer, op() against an allocating one): 1 ops; worst copy op() 7.0 us "
            "against torch's 5.6 us (1.25x)",
            "PASS  nvidia: ort.<op>_() <= p.run() + 1.0 us: 1 ops; worst copy op_() 5.4 us, p.run() 4.6 us",
            "PASS  nvidia: p.run() within 0.5 us of the driver's empty-kernel launch: 1 ops; worst copy "
            "4.6 us against the launch's 4.5 us",
        ])
        self.assertIsNone(targets.overhead_targets([nvidia], None)[-1].passed)


if __name__ == "__main__":
    sys.exit(unittest.main())
