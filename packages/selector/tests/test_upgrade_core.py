"""`testselect upgrade` across torch versions: the op_db dump run for real, a delta against an edited copy of it,
mapped onto a small `@ops` tree, and dumps that fail or print garbage."""

from __future__ import annotations

import copy
import json
import os
import random
import re
import sys
from pathlib import Path

import pytest
from testselect.cli import main
from testselect.evidence import store as evidence
from testselect.index.build import index_tree
from testselect.index.store import Store
from testselect.select.profile import load_profile
from testselect.select.reasoner import RuleReasoner
from testselect.upgrade.core import CoreDump, UpgradeError, compare, parse_dump, run_dump
from testselect.upgrade.run import core_upgrade

REPO = Path(__file__).resolve().parents[3]
SUBSET = ["add", "abs", "cholesky", "qr", "meshgrid"]  # meshgrid: its samples iterate a set of strings
OPSY = """
import torch
from torch.testing._internal.common_device_type import OpDTypes, instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase

_add_only = [op for op in op_db if op.name == "add"]


class TestOpsy(TestCase):
    @ops(op_db, allowed_dtypes=(torch.float32, torch.float16))
    def test_all(self, device, dtype, op):
        op(torch.ones(2, device=device, dtype=dtype))

    @ops(_add_only, allowed_dtypes=(torch.float32, torch.float16))
    def test_add_only(self, device, dtype, op):
        op(torch.ones(2, device=device, dtype=dtype))

    @ops(op_db, dtypes=OpDTypes.any_one)
    def test_one(self, device, dtype, op):
        op(torch.ones(2, device=device, dtype=dtype))

    @ops(helper_ops())
    def test_unknown(self, device, dtype, op):
        pass


instantiate_device_type_tests(TestOpsy, globals())
"""
PROFILE = "device: ring\nhooks: {eager_ops: yes}\ndtypes: [float16, bfloat16, float32]\n"


@pytest.fixture(scope="module")
def real_dump() -> CoreDump:
    """The dev venv's torch, dumped for real on four ops: fails loudly when torch moves a name the dump reads."""
    return run_dump(Path(sys.executable), SUBSET, max_samples=4)


def test_real_dump_of_a_subset(real_dump: CoreDump) -> None:
    assert re.match(r"2\.\d+\.\d+", real_dump.torch)
    meshgrid = ["meshgrid_list_of_tensors", "meshgrid_variadic_tensors"]
    assert sorted(real_dump.ops) == ["abs", "add", "cholesky", *meshgrid, "qr"]
    assert real_dump.lists["op_db"] == ["abs", "add", "cholesky", *meshgrid, "qr"]
    assert real_dump.ops["meshgrid_variadic_tensors"]["variant_test_name"] == "variadic_tensors"
    assert "add" in real_dump.lists["binary_ufuncs"]
    assert "abs" in real_dump.lists["unary_ufuncs"]
    add = real_dump.ops["add"]
    assert {"float16", "float32", "int64", "bool"} <= set(add["dtypes_cpu"])
    assert add["supports_autograd"] is True
    assert add["samples"] == 4
    assert re.fullmatch(r"[0-9a-f]{16}", add["samples_hash"])
    assert real_dump.ops["cholesky"]["dtypes_cpu"] == ["complex128", "complex64", "float32", "float64"]
    assert real_dump.modules["nn_Linear"]["module_cls"] == "torch.nn.modules.linear.Linear"
    assert real_dump.seconds > 0


def test_a_second_dump_is_identical(real_dump: CoreDump) -> None:
    """Sample hashes are reproducible: the same torch dumped again compares equal, meshgrid's set order included."""
    again = run_dump(Path(sys.executable), ["meshgrid"], max_samples=4)
    assert {name: again.ops[name] for name in again.ops} == {name: real_dump.ops[name] for name in again.ops}
    assert compare(real_dump.modules, again.modules).changed == {}


def _edited(dump: CoreDump) -> CoreDump:
    """A copy as a torch release might move it: cholesky gone, linalg.polar new, add without float16, abs resampled."""
    ops = copy.deepcopy(dump.ops)
    del ops["cholesky"]
    ops["linalg_polar"] = ops["qr"] | {"name": "linalg.polar"}
    ops["add"]["dtypes_cpu"] = [d for d in ops["add"]["dtypes_cpu"] if d != "float16"]
    ops["abs"]["samples_hash"] = "0" * 16
    lists = {name: sorted(set(members) - {"cholesky"}) for name, members in dump.lists.items()}
    lists["op_db"] = sorted([*lists["op_db"], "linalg_polar"])
    return CoreDump("2.99.0+test", ops, lists, dump.modules)


def test_delta_against_an_edited_copy(real_dump: CoreDump) -> None:
    delta = compare(real_dump.ops, _edited(real_dump).ops)
    assert delta.added == ["linalg_polar"]
    assert delta.removed == ["cholesky"]
    assert sorted(delta.changed) == ["abs", "add"]
    assert delta.changed["abs"] == {"samples_hash": [real_dump.ops["abs"]["samples_hash"], "0" * 16]}
    assert list(delta.changed["add"]) == ["dtypes_cpu"]


@pytest.fixture
def opsy(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "torch"
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_opsy.py").write_text(OPSY)
    profile = tmp_path / "backend.yaml"
    profile.write_text(PROFILE)
    return {"root": root, "profile": profile, "store": tmp_path / "index.sqlite"}


def test_core_delta_mapped_onto_ops_tests(real_dump: CoreDump, opsy: dict[str, Path]) -> None:
    store = Store.open(opsy["store"])
    index_tree(opsy["root"], store)
    evidence.ensure(store)
    for op in ("cholesky", "abs", "add"):  # all failed on CPU: cholesky's and abs's become stale
        case = f"test_opsy.py::TestOpsyCPU::test_all_{op}_cpu_float32"
        evidence.record(store, evidence.Case(case, "test_opsy.py::TestOpsy::test_all", "failed", 0.1))
    store.commit()
    reasoner = RuleReasoner(load_profile(opsy["profile"]))
    report, _ = core_upgrade(opsy["root"], store, real_dump, _edited(real_dump), reasoner, "ring")
    store.close()
    found = report["cases"]
    # total 16: test_all 5 (add, abs x2, qr, polar) + meshgrid's 2 variants x 2 dtypes, test_add_only 1, test_one 6
    assert (found["added"], found["removed"], found["changed"], found["total"]) == (2, 4, 3, 16)
    assert found["per_test"] == {
        "test_opsy.py::TestOpsy::test_all": {
            "added": ["linalg_polar float32"],
            "removed": ["add float16", "cholesky float32"],
            "changed": 2,
        },
        "test_opsy.py::TestOpsy::test_add_only": {"added": [], "removed": ["add float16"], "changed": 0},
        "test_opsy.py::TestOpsy::test_one": {"added": ["linalg_polar any"], "removed": ["cholesky any"], "changed": 1},
    }
    assert report["unresolved_sources"] == {"test_opsy.py::TestOpsy::test_unknown": "helper_ops()"}
    assert report["per_op_entries"] == [
        {"test": "test_opsy.py::TestOpsy::test_all", "ops": "linalg.polar", "dtype": "float32", "torch": "2.99.0"},
        {"test": "test_opsy.py::TestOpsy::test_one", "ops": "linalg.polar", "dtype": "any", "torch": "2.99.0"},
    ]
    assert (report["tests_reevaluated"], report["tests_total"]) == (3, 4)
    changed = [line for line in report["diff"] if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == [
        "-        # op evidence: CPU outcome: 3 of 3 float32 cases failed on the CPU reference run",
        "+        # op evidence: CPU outcome: 1 of 1 float32 cases failed on the CPU reference run",
        '-          reason: "3 of 3 float32 cases failed on the CPU reference run"',
        '+          reason: "1 of 1 float32 cases failed on the CPU reference run"',
    ]


def test_garbage_dumps_are_one_error_naming_the_field(real_dump: CoreDump) -> None:
    with pytest.raises(UpgradeError, match=r"^py: the dump is not JSON \(line 1 column 1: Expecting value\)$"):
        parse_dump("Segmentation fault\n", "py")
    good = json.loads(_dump_text(real_dump))
    good["ops"]["add"]["dtypes_cpu"] = "float32"
    with pytest.raises(UpgradeError, match=r"field ops\.add\.dtypes_cpu: expected list$"):
        parse_dump(json.dumps(good), "py")
    good["ops"]["add"]["dtypes_cpu"] = [32]
    with pytest.raises(UpgradeError, match=r"field ops\.add\.dtypes_cpu: expected a list of str$"):
        parse_dump(json.dumps(good), "py")
    good["ops"]["add"]["dtypes_cpu"] = []
    good["lists"]["op_db"].append("nope")
    with pytest.raises(UpgradeError, match=r"field lists: expected"):
        parse_dump(json.dumps(good), "py")


def _dump_text(dump: CoreDump) -> str:
    return json.dumps(
        {
            "format": "testselect-core-dump/1",
            "torch": dump.torch,
            "ops": dump.ops,
            "lists": dump.lists,
            "modules": dump.modules,
        }
    )


def test_fuzzed_dumps_parse_or_fail_with_one_line(real_dump: CoreDump) -> None:
    text = _dump_text(real_dump)
    rng = random.Random(5)
    errors = []
    for _ in range(200):
        chars = list(text)
        for _ in range(rng.randrange(1, 6)):
            chars[rng.randrange(len(chars))] = rng.choice('{}[]",:0a ')
        try:
            parse_dump("".join(chars), "py")
        except UpgradeError as exc:
            errors.append(str(exc))
    assert errors  # most mutations break the JSON or a field
    assert all("\n" not in e and e.startswith("py: the dump") for e in errors)


def test_interpreters_that_cannot_dump(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage"
    garbage.write_text("#!/bin/sh\necho hello\n")
    garbage.chmod(0o755)
    with pytest.raises(UpgradeError, match=r"the dump is not JSON"):
        run_dump(garbage)
    failing = tmp_path / "failing"
    failing.write_text("#!/bin/sh\necho 'error: torch 9.9: AttributeError: op_db' >&2\nexit 2\n")
    failing.chmod(0o755)
    with pytest.raises(UpgradeError, match=r"failed \(exit 2\): torch 9\.9: AttributeError: op_db$"):
        run_dump(failing)
    no_torch = tmp_path / "no-torch"  # this interpreter without site-packages: no torch, on any machine
    no_torch.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    no_torch.chmod(0o755)
    with pytest.raises(UpgradeError, match=r"failed \(exit 2\): .*: no usable torch \(No module named 'torch'\)$"):
        run_dump(no_torch)


def _torch_214_python() -> Path | None:
    """An interpreter with torch 2.14 (TESTSELECT_TORCH_2_14_PYTHON, which `nox -s "tests(selector)"` sets, else a
    tributary env that has it)."""
    if os.environ.get("TESTSELECT_TORCH_2_14_PYTHON"):
        return Path(os.environ["TESTSELECT_TORCH_2_14_PYTHON"])
    for meta in sorted((REPO / ".tributary" / "envs").glob("*/lib/python*/site-packages/torch-2.14.*.dist-info")):
        python = meta.parents[3] / "bin" / "python"
        if python.exists():
            return python
    return None


def test_cli_between_two_real_torch_versions(tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """2.13 (this venv) -> 2.14 on three ops of the embedded tree: linalg.polar comes, cholesky goes."""
    other = _torch_214_python()
    if other is None:
        pytest.skip(
            "no interpreter with torch 2.14: set TESTSELECT_TORCH_2_14_PYTHON (`crcr env --core 2.14.1 expecttest "
            'numpy` prints one; `nox -s "tests(selector)"` makes and sets it)'
        )
    args = ["upgrade", "--from", sys.executable, "--to", str(other), "--torch-root", str(tree)]
    args += ["--profile", str(REPO / "configs" / "backend.yaml"), "--store", str(tmp_path / "s.sqlite")]
    assert main([*args, "--ops", "add,linalg.polar,cholesky", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["to"]["torch"].startswith("2.14.")
    assert (report["opinfos"]["added"], report["opinfos"]["removed"]) == (["linalg_polar"], ["cholesky"])
    assert report["cases"]["per_file"]["test_ops.py"] | {"total": 0} == {
        "added": 3,
        "removed": 3,
        "changed": 0,
        "total": 0,
    }
    assert sorted(report["cases"]["per_test"]) == [
        "test_ops.py::TestCommon::test_compare_cpu",
        "test_ops.py::TestCommon::test_embedded_out_matches_functional",
        "test_ops.py::TestCommon::test_noncontiguous_samples",
    ]
