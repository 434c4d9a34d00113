"""A planned matmul (B overflows a core) runs its pointwise consumers on each output tile of its division."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import ringsim
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from ring_inductor import config, fusion
from ring_inductor.checking import compiled_kernels, compiled_run, float64_reference
from ring_inductor.fusion_planned import blocked
from ring_inductor.indexing import Access
from ring_inductor.tolerance import device_bound, excess

torch.manual_seed(0)
M, K, N = 256, 512, 2048  # B is 2 MiB of fp16: more than a core's scratchpad
X = torch.randn(M, K, dtype=torch.float16)
W = (torch.randn(N, K) / K**0.5).half()  # nn.Linear's [out, in]
BIAS = torch.randn(N, dtype=torch.float16)
RESIDUAL = torch.randn(M, N, dtype=torch.float16)


def _bound() -> Any:
    matmul = device_bound(torch.float16, "matmul", k=K, scale=1.0)
    return type(matmul)(2 * matmul.rtol, 2 * matmul.atol)


def _matmul_kernels(kernels: dict[str, int]) -> list[str]:
    return [k for k in compiled_kernels(kernels) if not k.startswith("ring_relayout_")]


def _cycles(fn: Callable[..., Any], *inputs: torch.Tensor) -> int:
    compiled_run(fn, *inputs)
    compiled_run(fn, *inputs)
    return ringsim.stats()["cycles"]["total"]


def test_gelu_of_a_planned_linear_is_one_kernel_and_matches_float64() -> None:
    fn = lambda x, w, b: F.gelu(F.linear(x, w, b))  # noqa: E731
    out, kernels = compiled_run(fn, X, W, BIAS)
    (kernel,) = _matmul_kernels(kernels)
    assert kernel.startswith("ring_addmm_"), kernels
    assert excess(out, float64_reference(fn, X, W, BIAS), _bound()) <= 0


def test_a_full_operand_of_the_consumers_is_read_tile_by_tile() -> None:
    fn = lambda x, w, r: F.silu(x @ w.t()) * r + 1  # noqa: E731
    out, kernels = compiled_run(fn, X, W, RESIDUAL)
    assert len(_matmul_kernels(kernels)) == 1, kernels
    assert excess(out, float64_reference(fn, X, W, RESIDUAL), _bound()) <= 0


def test_a_planned_product_read_elsewhere_is_also_stored() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x @ w.t()
        return y, torch.relu(y) * 2

    (product, relu), kernels = compiled_run(fn, X, W)
    assert len(_matmul_kernels(kernels)) == 1, kernels
    want_product, want_relu = float64_reference(fn, X, W)
    assert excess(product, want_product, _bound()) <= 0
    assert excess(relu, want_relu, _bound()) <= 0


def test_a_planned_addmm_alone_adds_its_bias_in_its_own_tiles() -> None:
    fn = lambda x, w, b: F.linear(x, w, b)  # noqa: E731
    out, kernels = compiled_run(fn, X, W, BIAS)
    (kernel,) = _matmul_kernels(kernels)
    assert kernel.startswith("ring_addmm_"), kernels
    assert excess(out, float64_reference(fn, X, W, BIAS), _bound()) <= 0


def test_fusing_a_planned_matmul_takes_fewer_cycles_than_spilling(monkeypatch: pytest.MonkeyPatch) -> None:
    fn = lambda x, w, b: F.gelu(F.linear(x, w, b))  # noqa: E731
    fused = _cycles(fn, X, W, BIAS)
    monkeypatch.setattr(config, "fuse_matmul_epilogues", False)
    assert fused < _cycles(fn, X, W, BIAS)


def test_the_dump_names_the_division_that_carries_the_consumers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(config, "dump_dir", str(tmp_path))
    compiled_run(lambda x, w: torch.tanh(x @ w.t()), X, W)
    dumped = [json.loads(f.read_text()) for f in tmp_path.glob("*.decisions.json")]
    (verdict,) = [d["fusion"] for d in dumped if "fusion" in d]
    assert verdict["fused"], verdict
    assert verdict["division"]["scheme"] in ("ring", "row_ring", "grid"), verdict
    assert verdict["splits"][0].endswith("carrying its consumers"), verdict


def test_a_consumer_computing_from_its_index_spills_and_stays_correct(monkeypatch: pytest.MonkeyPatch) -> None:
    verdicts: list[fusion.Choice] = []

    def recorded(buffer: Any, nodes: list[Any]) -> fusion.Choice:
        verdicts.append(choose(buffer, nodes))
        return verdicts[-1]

    choose = fusion.choose
    monkeypatch.setattr(fusion, "choose", recorded)
    fn = lambda x, w: torch.where(torch.arange(N, device=x.device) < 100, x @ w.t(), 0.0)  # noqa: E731
    out, kernels = compiled_run(fn, X, W)
    assert len(_matmul_kernels(kernels)) == 2, kernels
    assert verdicts, "the scheduler never offered the matmul its consumer"
    assert all("computes from its index" in v.refused for v in verdicts), [v.refused for v in verdicts]
    assert excess(out, float64_reference(fn, X, W), _bound()) <= 0


@settings(max_examples=60, deadline=None)
@given(
    rows=st.sampled_from([(64,), (4, 16), (2, 8, 4)]),
    cols=st.sampled_from([(32,), (4, 8)]),
    tile=st.sampled_from([(4, 8), (16, 4), (2, 32), (64, 32)]),
    cols_first=st.booleans(),
    groups=st.sampled_from([1, 2, 4]),
    transposed=st.booleans(),
)
def test_a_blocked_view_holds_the_tiles_in_the_divisions_order(rows, cols, tile, cols_first, groups, transposed):
    # a tensor over [64, 32] stored row-major or transposed, indexed through row dims and col dims as a kernel sees it
    m, n = math.prod(rows), math.prod(cols)
    base = torch.arange(m * n * 2).reshape(-1)
    matrix = base[5 : 5 + m * n].reshape(n, m).t() if transposed else base[5 : 5 + m * n].reshape(m, n)
    view = matrix.reshape(*rows, *cols) if not transposed else matrix.unflatten(0, rows).unflatten(-1, cols)
    access = Access("full", tuple(view.shape), tuple(view.stride()), view.storage_offset())
    tm, tn = tile
    row_tiles = m // tm
    assume(row_tiles % groups == 0)
    got = blocked(access, n, tile, cols_first=cols_first, row_groups=groups)
    actual = torch.as_strided(base, got.sizes, got.strides, got.offset).reshape(-1)
    tiles = matrix.reshape(row_tiles // groups, groups, tm, n // tn, tn).permute(1, 0, 3, 2, 4)
    if cols_first:
        tiles = tiles.permute(0, 2, 1, 3, 4)
    assert torch.equal(actual, tiles.reshape(-1))


def test_a_bias_band_narrower_than_a_stick_is_repeated_onto_whole_sticks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the ring scheme gives each core 1024 / 32 = 32 columns: a 64-byte band of the fp16 bias, stored twice over so
    # that each core's band starts on a stick
    monkeypatch.setattr(config, "dump_dir", str(tmp_path))
    x, w, b = X[:128, :].repeat(1, 2), (torch.randn(1024, 1024) / 32).half(), torch.randn(1024, dtype=torch.float16)
    fn = lambda x, w, b: torch.sigmoid(F.linear(x, w, b))  # noqa: E731
    out, kernels = compiled_run(fn, x, w, b)
    assert len(_matmul_kernels(kernels)) == 1, kernels
    assert excess(out, float64_reference(fn, x, w, b), _bound()) <= 0
    (dumped,) = [json.loads(f.read_text()) for f in tmp_path.glob("ring_addmm_*.decisions.json")]
    assert dumped["fusion"]["division"]["scheme"] == "ring", dumped["fusion"]
    (bias,) = [op for op in dumped["operands"] if op["name"] == "mm_bias"]
    assert (bias["sizes"], bias["strides"]) == ([32, 2, 32], [32, 0, 1]), bias


def test_the_row_ring_carries_its_consumers_and_reads_and_writes_whole_rows_as_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2,048 rows: the row ring wins; each core's rows of the product, the residual and the result are one DMA each,
    # so only the bias (a 64-byte band per tile, repeated onto sticks) is relaid
    monkeypatch.setattr(config, "dump_dir", str(tmp_path))
    x, residual, scale = X.repeat(8, 1), RESIDUAL.repeat(8, 1), torch.randn(8 * M, dtype=torch.float16)
    fn = lambda x, w, b, r, s: F.gelu(F.linear(x, w, b)) * r + s[:, None]  # noqa: E731
    out, kernels = compiled_run(fn, x, W, BIAS, residual, scale)
    assert len(_matmul_kernels(kernels)) == 1, kernels
    assert [k for k in kernels if k.startswith("ring_relayout_")] == ["ring_relayout_float16_64s32_2s0_32s1_blocks"]
    assert excess(out, float64_reference(fn, x, W, BIAS, residual, scale), _bound()) <= 0
    (dumped,) = [json.loads(f.read_text()) for f in tmp_path.glob("ring_addmm_*.decisions.json")]
    assert dumped["fusion"]["division"]["scheme"] == "row_ring", dumped["fusion"]
    full = {op["name"]: op for op in dumped["operands"] if op["sizes"] == [8 * M, N]}
    assert len(full) == 2, dumped["operands"]
    assert all(op["strides"] == [N, 1] for op in full.values()), dumped["operands"]


def test_the_sliced_row_ring_reads_input_and_weight_as_stored_in_chunks_of_k(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a transformer's up projection, [2048, 1024] x [1024, 4096]: the row ring cuts its K-chunks on chip out of
    # each core's rows of the input and band of the weight, so neither is relaid into K-chunk blocks
    monkeypatch.setattr(config, "dump_dir", str(tmp_path))
    x, w, bias = X.repeat(8, 2), (torch.randn(2 * N, 2 * K) / (2 * K) ** 0.5).half(), BIAS.repeat(2)
    fn = lambda x, w, b: F.gelu(F.linear(x, w, b))  # noqa: E731
    out, kernels = compiled_run(fn, x, w, bias)
    assert len(_matmul_kernels(kernels)) == 1, kernels
    assert [k for k in kernels if k.startswith("ring_relayout_")] == [], kernels
    assert excess(out, float64_reference(fn, x, w, bias), _bound()) <= 0
    (dumped,) = [json.loads(f.read_text()) for f in tmp_path.glob("ring_addmm_*.decisions.json")]
    division = dumped["fusion"]["division"]
    assert (division["scheme"], division["sliced"]) == ("row_ring", True), division
    assert division["tile"]["k"] < 2 * K


def test_a_row_operand_of_the_consumers_is_read_piece_by_piece() -> None:
    # a scale per row: the ring scheme's pieces are 256 / 32 = 8 rows, 16 bytes of fp16, repeated onto a stick
    scale = torch.randn(M, dtype=torch.float16)
    fn = lambda x, w, s: torch.relu(x @ w.t()) * s[:, None]  # noqa: E731
    out, kernels = compiled_run(fn, X, W, scale)
    assert len(_matmul_kernels(kernels)) == 1, kernels
    assert excess(out, float64_reference(fn, X, W, scale), _bound()) <= 0
