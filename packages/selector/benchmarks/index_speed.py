"""Index time and store size: the embedded tree, the real upstream copies, a synthetic tree of 50,000 tests, and the
incremental re-index after editing 1% of the synthetic files, each as seconds and as a ratio to the full index time
measured in the same run.

    .venv/bin/python packages/selector/benchmarks/index_speed.py [--files 500] [--tests 100]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from testselect import similar
from testselect.index.build import index_tree
from testselect.index.store import Store

REPO = Path(__file__).resolve().parents[3]
EMBEDDED = REPO / "packages" / "testreuse" / "src" / "testreuse" / "upstream"
REAL = REPO.parent / "shared" / "data" / "upstream-tests"

_HEADER = """import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests, onlyCPU, ops
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase, parametrize

_ops = [op for op in op_db if op.name in ("add", "mul", "view")]


class TestSynthetic{index}(TestCase):
"""
_TESTS = (
    '''    @dtypes(torch.float32, torch.float64)
    def test_add_{index}(self, device, dtype):
        """Adds two tensors number {index}."""
        x = torch.ones(3, device=device, dtype=dtype)
        self.assertEqual(torch.add(x, x), x * 2)
''',
    """    @onlyCPU
    @ops(_ops, allowed_dtypes=(torch.float32,))
    def test_op_{index}(self, device, dtype, op):
        sample = next(iter(op.sample_inputs(device, dtype)))
        op(sample.input, *sample.args, **sample.kwargs)
""",
    """    @parametrize("n", [1, 2, 3])
    def test_grad_{index}(self, device, n):
        x = torch.randn(n, requires_grad=True, device=device)
        (x * x).sum().backward()
        self.assertEqual(x.grad, 2 * x)
""",
)


def synthetic_tree(root: Path, files: int, tests: int) -> None:
    """`files` files of `tests` decorated tests each, under root/test."""
    (root / "test").mkdir(parents=True)
    for number in range(files):
        body = [_HEADER.format(index=number)]
        body += [_TESTS[i % len(_TESTS)].format(index=i) for i in range(tests)]
        body.append(f"\n\ninstantiate_device_type_tests(TestSynthetic{number}, globals())\n")
        (root / "test" / f"test_synthetic_{number:04d}.py").write_text("\n".join(body), encoding="utf-8")


def timed_index(root: Path, store_path: Path) -> tuple[float, object]:
    store = Store.open(store_path)
    try:
        start = time.perf_counter()
        counts = index_tree(root, store)
        return time.perf_counter() - start, counts
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--tests", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="testselect-bench-") as scratch:
        scratch_dir = Path(scratch)
        trees = [("embedded", EMBEDDED)]
        if (REAL / "test").is_dir():
            trees.append(("real", REAL))
        for name, root in trees:
            store_path = scratch_dir / f"{name}.sqlite"
            full, counts = timed_index(root, store_path)
            again, _ = timed_index(root, store_path)
            print(
                f"{name}: {counts.files_scanned} files, {counts.tests_added} tests: full index {full:.3f} s, "
                f"store {store_path.stat().st_size / 1024:.0f} KiB; unchanged re-index {again:.3f} s "
                f"({again / full:.3f} of full)"
            )
        root = scratch_dir / "synthetic"
        synthetic_tree(root, args.files, args.tests)
        store_path = scratch_dir / "synthetic.sqlite"
        full, counts = timed_index(root, store_path)
        print(
            f"synthetic: {counts.files_scanned} files, {counts.tests_added} tests: full index {full:.3f} s, "
            f"store {store_path.stat().st_size / 1024 / 1024:.1f} MiB"
        )
        store = Store.open(store_path)
        start = time.perf_counter()
        similar.rank(store.tests(), similar.tokens("gradient of a squared tensor"), 10)
        store.close()
        query = time.perf_counter() - start
        print(f"synthetic: one `similar` query over the store {query:.3f} s (BM25 built per query)")
        again, _ = timed_index(root, store_path)
        print(f"synthetic: unchanged re-index {again:.3f} s ({again / full:.3f} of full)")
        touched = sorted((root / "test").glob("*.py"))[:: max(1, 100)]  # 1% of the files
        for path in touched:
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace("x * 2)\n", "x + x)\n", 1), encoding="utf-8")  # one test's body
        incremental, counts = timed_index(root, store_path)
        print(
            f"synthetic: {len(touched)} files edited ({len(touched) / counts.files_scanned:.0%}), one test each: "
            f"incremental re-index {incremental:.3f} s ({incremental / full:.3f} of full); "
            f"tests changed {counts.tests_changed}, unchanged {counts.tests_unchanged}, "
            f"files unchanged {counts.files_unchanged}"
        )


if __name__ == "__main__":
    main()
