"""The bench's offline tools on a saved run: compare.py's side-by-side table,
report.py's plots redrawn from JSON, and the overhead target's verdict."""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
import unittest
from types import SimpleNamespace

import torch

from tools.bench import compare, peers, report, sweep, targets


def _result(op: str, case: str, us: float, torch_us: float | None, dtype: str = "f32") -> dict:
    gbps = 1e3 / us
    torch = {"us": torch_us, "gbps": 1e3 / torch_us, "ratio": torch_us / us, "unavailable": None} \
        if torch_us is not None else {"us": None, "gbps": None, "ratio": None, "unavailable": "no"}
    return {"op": op, "case": case, "dtype": dtype, "shapes": "1024", "backend": "nvidia", "us": us,
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

    def test_compare_keeps_cases_of_one_shape_in_each_dtype(self) -> None:
        # --shapes names cases by shape alone, one per dtype.
        results = [_result("softmax_backward", "64x256", 10.0, 12.0, dtype) for dtype in ("f32", "bf16")]
        path = os.path.join(self.directory, "shapes.json")
        with open(path, "w") as f:
            json.dump(_run(results), f)
        lines = compare.table([("a", compare.load(path)), ("b", compare.load(path))])
        self.assertEqual([line.split()[:3] for line in lines[1:]],
                         [["softmax_backward", "f32", "64x256"], ["softmax_backward", "bf16", "64x256"]])
        self.assertEqual(lines[0].index("dtype"), lines[1].index("f32"))  # columns aligned

    def test_compare_joins_sweep_points_by_dtype_axis_and_shape(self) -> None:
        def point(dtype: str, axis: str, rows: int, length: int, us: float) -> dict:
            torch = {"us": 2 * us, "gbps": 1.0, "ratio": 2.0, "unavailable": None}
            return {"op": "reduce_sum", "dtype": dtype, "axis": axis, "mode": "fixed bytes", "rows": rows,
                    "row_length": length, "bytes": 10**6, "us": us, "gbps": 1e3 / us, "copy_gbps": 200.0,
                    "peers": {"torch": torch}}

        runs = []
        for label, us in (("head", 10.0), ("held", 5.0)):
            path = os.path.join(self.directory, f"sweep_{label}.json")
            points = [point("bf16", "last", 8, 32768, us), point("bf16", "leading", 8, 32768, 2 * us)]
            if label == "head":
                points.append(point("f32", "last", 8, 32768, us))
            with open(path, "w") as f:
                json.dump({"device": "test", "op": "reduce_sum", "backend": "nvidia", "peers": ["torch"],
                           "points": points}, f)
            runs.append((label, compare.load(path)))
        lines = compare.table(runs)
        self.assertEqual(len(lines), 3, lines)  # header, the two bf16 points both runs have
        self.assertEqual(lines[1].split(), ["reduce_sum", "bf16", "8x32768", "10.0", "100.0", "5.0", "200.0",
                                            "2.00", "20.0"])
        self.assertEqual(lines[2].split()[2], "8x32768_leading")

    def test_bench_refuses_malformed_flags_with_a_message(self) -> None:
        from tools.bench import bench

        cases = {
            "--dtype=f64": "--dtype=f64: expected 'all' or a comma list of f32, f16, bf16",
            "--shapes=abc": "--shapes=abc: expected shapes like 8192x8192,1024x32768",
            "--shapes=8x0": "--shapes=8x0: expected shapes like 8192x8192,1024x32768",
            "--sweep_lengths=abc": "--sweep_lengths=abc: expected row lengths like 500,4096,50257",
            "--sweep_rows=x": "--sweep_rows=x: expected row counts like 1,8,64",
            "--dtype=f32,bf16": None,
        }
        try:
            for flag, problem in cases.items():
                bench.FLAGS.unparse_flags()
                bench.FLAGS(["bench", flag])
                self.assertEqual(bench._flag_problem(), problem, flag)
        finally:
            bench.FLAGS.unparse_flags()

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

    def test_sweep_verdicts_and_saved_points(self) -> None:
        def point(length: int, gbps: float, peer_gbps: float, rows: int = 1024) -> sweep.SweepPoint:
            return sweep.SweepPoint(op="softmax", dtype="f32", axis="last", mode="fixed bytes", rows=rows,
                                    row_length=length, bytes=10**9, us=1.0, gbps=gbps, copy_gbps=4000.0,
                                    peers={"torch": peers.PeerTiming(us=1.0, gbps=peer_gbps),
                                           "liger": peers.PeerTiming(unavailable="rows too long")})

        points = [point(256, 3900.0, 3800.0), point(500, 3000.0, 3100.0), point(512, 3800.0, 3700.0),
                  point(2**17, 3700.0, 2000.0, rows=512)]
        lines = [v.line() for v in targets.sweep_targets("softmax", points)]
        self.assertTrue(lines[0].startswith("FAIL  softmax >= 1.0x the best peer at every point: 3/4 points; "
                                            "worst f32 last axis fixed bytes 1024x500 0.97x"), lines[0])
        self.assertTrue(lines[1].startswith("FAIL  softmax >= 90% of the copy"), lines[1])
        self.assertIn("3/4 points", lines[1])
        self.assertTrue(lines[2].startswith("PASS  softmax rows >= 2^17 at >= 3.6 TB/s"), lines[2])
        # 500 sits between 256 (3900) and 512 (3800): 3000 / 3800 = 0.79.
        self.assertIn("FAIL  softmax no row length below 0.9x of its aligned neighbours", lines[3])
        self.assertIn("0/1 points; worst f32 last axis fixed bytes 1024x500 0.79x", lines[3])
        self.assertEqual(sweep.row_lengths("500,32,500"), [32, 500])
        self.assertIn(50257, sweep.row_lengths(None))
        path = os.path.join(self.directory, "sweep_softmax.json")
        sweep.save(path, points, device="test", op="softmax")
        self.assertEqual(sweep.load(path), points)

    def test_sweep_runs_every_op_on_the_cpu(self) -> None:
        """A tiny sweep of each op on the cpu backend against torch: a point per row
        length and axis with the op's declared bytes, the JSON, a plot and the verdicts."""
        for op in sweep.SWEEP_OPS:
            spec = importlib.import_module(f"ops.{op}.cases").OP
            out_dir = os.path.join(self.directory, op)
            verdicts = sweep.run(op, spec, "cpu", [torch.float32], ["torch"], mb=0.01, rows_list=[],
                                 lengths_text="33,64", out_dir=out_dir, warmup=1, iters=3, device_name="cpu")
            points = sweep.load(os.path.join(out_dir, f"sweep_{op}.json"))
            self.assertEqual([(p.axis, p.row_length) for p in points],
                             [(axis, n) for axis in sweep.AXES[op] for n in (33, 64)])
            inputs = 2 if op == "softmax_backward" else 1
            for p in points:
                self.assertEqual((p.op, p.dtype, p.mode), (op, "f32", "fixed bytes"))
                elements = p.rows * p.row_length
                self.assertEqual(p.bytes, 4 * (inputs * elements + (p.rows if op == "reduce_sum" else elements)))
                self.assertGreater(p.gbps, 0)
                self.assertGreater(p.peers["torch"].gbps, 0)
            self.assertTrue(os.path.exists(os.path.join(out_dir, f"sweep_{op}_f32.png")))
            self.assertEqual(len(verdicts), 4, verdicts)
            for line in verdicts:
                self.assertRegex(line, rf"^(PASS|FAIL|n/a ) +{op} ")


if __name__ == "__main__":
    sys.exit(unittest.main())
