"""Kernels whose rows overflow a core's scratchpad walk each row in column chunks, one pass per reduction level,
and match the float64 reference within the device bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from ring_inductor import config
from ring_inductor.checking import compiled_kernels, compiled_run, float64_reference
from ring_inductor.tolerance import device_bound, excess


def _layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w, b)


#: name -> (fn, input shapes, numerics class, reduced length, passes of its looped kernel)
CASES = {
    "row_sum": (lambda x: x.sum(-1), [(64, 262144)], "reduction", 262144, 1),
    "full_sum": (lambda x: x.sum(), [(2048, 4096)], "reduction", 2048 * 4096, 1),
    "row_amax_amin": (lambda x: x.amax(-1) - x.amin(-1), [(32, 262144)], "rounded", 1, 1),
    "softmax": (lambda x: torch.softmax(x, -1), [(4, 524288)], "normalization", 524288, 3),
    "layer_norm": (_layer_norm, [(8, 262144), (262144,), (262144,)], "normalization", 262144, 3),
    "var_mean": (lambda x: torch.var_mean(x, -1)[0], [(16, 262144)], "reduction", 262144, 2),
}


@pytest.fixture
def dump_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(config, "dump_dir", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("name", CASES)
def test_a_row_too_long_for_the_scratchpad_is_walked_in_column_chunks(name: str, dump_dir: Path) -> None:
    fn, shapes, kind, k, passes = CASES[name]
    torch.manual_seed(0)
    inputs = [torch.randn(*shape) for shape in shapes]
    out, kernels = compiled_run(fn, *inputs)
    assert set(kernels) == set(compiled_kernels(kernels)), f"an eager kernel ran: {kernels}"
    reference = float64_reference(fn, *inputs)
    scale = float(reference.abs().max()) if kind == "reduction" else 4.0
    assert excess(out, reference, device_bound(torch.float32, kind, k=k, scale=scale)) <= 0
    looped = [d for d in map(json.loads, (p.read_text() for p in dump_dir.glob("*.decisions.json"))) if "loop" in d]
    assert len(looped) == 1, kernels
    (decisions,) = looped
    assert decisions["loop"]["passes"] == passes
    assert decisions["loop"]["scratchpad_bytes"] <= 1_625_216
    whole_row = 4 * decisions["loop"]["cols"] * decisions["loop"]["row_chunk"]
    assert decisions["loop"]["col_chunk"] < decisions["loop"]["cols"] or whole_row * 2 > 1_625_216


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_an_index_reduction_over_column_chunks_keeps_the_first_best_and_nans(op: str, dump_dir: Path) -> None:
    torch.manual_seed(0)
    x = torch.randn(8, 262144)
    x[1, 200_000] = x[1, 10] = 50.0 if op == "argmax" else -50.0  # a tie across chunks: the first index wins
    x[2, 250_000] = float("nan")  # a NaN in a late chunk beats every number
    x[3, 7] = x[3, 260_000] = float("nan")  # the first NaN, even against a later one
    fn = lambda t: getattr(t, op)(-1)  # noqa: E731
    out, kernels = compiled_run(fn, x)
    assert set(kernels) == set(compiled_kernels(kernels)), f"an eager kernel ran: {kernels}"
    assert torch.equal(out.cpu(), fn(x))
    (decisions,) = [d for d in (json.loads(p.read_text()) for p in dump_dir.glob("*.decisions.json")) if "loop" in d]
    assert decisions["loop"]["col_chunk"] < 262144


def test_rows_that_are_not_whole_sticks_are_refused_naming_them() -> None:
    with pytest.raises(Exception, match=r"rows of 400003 elements are not whole sticks"):
        compiled_run(lambda x: x.sum(-1), torch.randn(4, 400003))
