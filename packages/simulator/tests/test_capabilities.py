"""`ringsim capabilities` exports the registry in the shape the test framework reads as `global`."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from ringsim.capabilities import capabilities
from ringsim.cli import main
from ringsim.ops.registry import OPINFO_NEEDS, SPECS


def test_shape_matches_the_test_framework_global_section() -> None:
    data = capabilities()
    assert data["device"] == "ring"
    assert {"name": "float16"} in data["supported_dtypes"]
    assert all(set(d) == {"name"} for d in data["supported_dtypes"])
    assert not {"float64", "complex64"} & {d["name"] for d in data["supported_dtypes"]}
    for op in data["supported_ops"]:
        assert set(op) == {"name", "dtypes"}
        assert op["dtypes"]
        assert all(set(d) == {"name"} for d in op["dtypes"])
    add = next(op for op in data["supported_ops"] if op["name"] == "add")
    names = [d["name"] for d in add["dtypes"]]
    assert names == ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32"]
    exp = next(op for op in data["supported_ops"] if op["name"] == "exp")
    assert [d["name"] for d in exp["dtypes"]] == ["float16", "bfloat16", "float32"]


def test_exports_every_registry_op_and_opinfo_entry() -> None:
    data = capabilities()
    assert [op["name"] for op in data["supported_ops"]] == sorted(OPINFO_NEEDS)
    aten = {op["name"] for op in data["aten_ops"]}
    for spec in SPECS:
        for name in spec.names:
            assert f"aten::{name}" in aten
    assert "aten::add_.Tensor" in aten
    assert "aten::add.out" in aten


def test_runtime_kernels_take_any_dtype_as_exported() -> None:
    """The runtime's kernels move bytes: exported without dtypes, and a complex tensor makes the round trip."""
    runtime = {op["name"]: op for op in capabilities()["aten_ops"] if op["kind"] == "runtime"}
    assert {"aten::_copy_from", "aten::empty_strided", "aten::_local_scalar_dense"} <= runtime.keys()
    assert all("dtypes" not in op for op in runtime.values())
    x = torch.tensor([1 + 2j, -3.5j], dtype=torch.complex128)
    on_ring = x.to("ring")
    assert torch.equal(on_ring.clone().cpu(), x)
    assert on_ring[0].item() == 1 + 2j
    with pytest.raises(NotImplementedError, match=r"aten::add\.Tensor is not supported for dtype complex128"):
        on_ring + on_ring


@pytest.mark.parametrize("op", ["nonzero", "masked_select"])
def test_an_out_form_the_device_refuses_is_not_exported(op: str) -> None:
    """The out= forms of data-dependent ops are refused by name: the export must not promise them."""
    aten = {o["name"] for o in capabilities()["aten_ops"]}
    assert f"aten::{op}" in aten
    assert f"aten::{op}.out" not in aten
    x = torch.tensor([0.0, 1.0, 2.0], device="ring")
    args = (x,) if op == "nonzero" else (x, x > 0)
    with pytest.raises(NotImplementedError, match=rf"aten::{op}\.out"):
        getattr(torch, op)(*args, out=torch.empty(0, dtype=torch.int64 if op == "nonzero" else x.dtype, device="ring"))


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_cli_output_is_deterministic_and_parses(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capabilities", "--format", fmt]) == 0
    first = capsys.readouterr().out
    assert main(["capabilities", "--format", fmt]) == 0
    assert capsys.readouterr().out == first
    data = yaml.safe_load(first) if fmt == "yaml" else json.loads(first)
    assert data == capabilities()
    if fmt == "yaml":
        assert "&id" not in first
        assert "*id" not in first


def test_cli_writes_a_file(tmp_path) -> None:
    target = tmp_path / "caps.yaml"
    assert main(["capabilities", "-o", str(target)]) == 0
    assert yaml.safe_load(target.read_text())["device"] == "ring"


def test_cli_unwritable_output_is_one_error_line(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["capabilities", "-o", str(tmp_path / "missing" / "caps.yaml")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ")
    assert err.count("\n") == 1
    assert "cannot write" in err


def test_cli_rejects_an_unknown_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capabilities", "--format", "toml"]) == 2
    assert "toml" in capsys.readouterr().err
