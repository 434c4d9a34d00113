"""The layout pass in the compiled path: a matmul reads a right operand stored along K as it is, not transposed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import ringsim
import torch
import torch.nn.functional as F
from ring_inductor import config, sticks
from ring_inductor.checking import compiled_run, float64_reference
from ring_inductor.tolerance import device_bound, excess

#: name -> (fn, its fp16 inputs, K of its matmul)
CASES: dict[str, tuple[Callable[..., Any], Callable[[], tuple[torch.Tensor, ...]], int]] = {
    "mm of a transposed weight": (
        lambda x, w: x @ w.t(),
        lambda: (torch.randn(256, 128), torch.randn(64, 128) / 11),
        128,
    ),
    "linear with a bias": (
        lambda x, w, b: F.linear(x, w, b),
        lambda: (torch.randn(256, 128), torch.randn(64, 128) / 11, torch.randn(64)),
        128,
    ),
    "bmm of transposed keys": (
        lambda q, k: q @ k.transpose(-2, -1),
        lambda: (torch.randn(8, 128, 64), torch.randn(8, 96, 64)),
        64,
    ),
    "bmm of keys sliced out of a fused kv product": (  # their runs are copied together, not transposed
        lambda q, kv: q @ kv[..., :64].transpose(-2, -1),
        lambda: (torch.randn(8, 128, 64), torch.randn(8, 96, 128)),
        64,
    ),
    "4-D attention keys out of a fused qkv product": (  # aten's matmul copies them: into K-sticks, not N-sticks
        lambda q, x: q @ _heads(x, 1).transpose(-2, -1),
        lambda: (torch.randn(2, 4, 128, 64), torch.randn(2, 128, 768)),
        64,
    ),
    "gelu(linear) fused": (
        lambda x, w, b: F.gelu(F.linear(x, w, b)),
        lambda: (torch.randn(256, 128), torch.randn(256, 128) / 11, torch.randn(256)),
        128,
    ),
    "planned gelu(linear), B overflowing a core": (
        lambda x, w, b: F.gelu(F.linear(x, w, b)),
        lambda: (torch.randn(256, 1024), torch.randn(4096, 1024) / 32, torch.randn(4096)),
        1024,
    ),
}


def _heads(x: torch.Tensor, which: int) -> torch.Tensor:
    """q, k or v ([batch, heads, tokens, 64]) of a fused [batch, tokens, 3 * heads * 64] product."""
    batch, tokens, width = x.shape
    return x.view(batch, tokens, 3, width // 192, 64).permute(2, 0, 3, 1, 4)[which]


def _run(case: str, layout_pass: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[torch.Tensor, list[str], float]:
    fn, make, _ = CASES[case]
    torch.manual_seed(0)
    inputs = tuple(t.half() for t in make())
    monkeypatch.setattr(config, "layout_pass", layout_pass)
    with torch.no_grad(), ringsim.profile() as profile:
        out, _ = compiled_run(fn, *inputs)
    return out.cpu(), [r.name for r in profile.reports], sum(r.total_cycles for r in profile.reports)


def _transposing(kernels: list[str]) -> list[str]:
    """The relayout programs whose innermost dim is strided (`..._64s128_blocks`): a transpose, not a copy of
    whole runs of rows."""
    relayouts = [name.rsplit("_", 1)[0].removesuffix("_store") for name in kernels if name.startswith("ring_relayout_")]
    inner = [name.rsplit("_", 1)[-1] for name in relayouts]
    return [dims for dims in inner if not dims.endswith("s1")]


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_right_operand_stored_along_k_is_not_transposed_and_the_result_holds(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fn, make, k = CASES[case]
    off, off_kernels, off_cycles = _run(case, False, monkeypatch)
    on, on_kernels, on_cycles = _run(case, True, monkeypatch)
    assert _transposing(off_kernels), off_kernels  # the baseline transposes B; the layout pass does not
    assert not _transposing(on_kernels), on_kernels
    assert on_cycles <= off_cycles
    torch.manual_seed(0)
    reference = float64_reference(fn, *(t.half() for t in make()))
    assert excess(on, reference, device_bound(torch.float16, "matmul", k=k, scale=4)) <= 0
    assert excess(off, reference, device_bound(torch.float16, "matmul", k=k, scale=4)) <= 0


def test_the_planned_matmul_dumps_the_layout_pass_decision_and_b_s_packing_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config, "dump_dir", str(tmp_path))
    x, w = torch.randn(256, 1024, dtype=torch.float16), (torch.randn(4096, 1024) / 32).half()
    compiled_run(lambda x, w: x @ w.t(), x, w)
    (decisions_file,) = tmp_path.glob("ring_mm_planned_*_along_k.decisions.json")
    layout = json.loads(decisions_file.read_text())["layout"]
    assert layout["b"].startswith("along K")
    assert layout["restickifies"] == []
    assert layout["sticks"]["b"] == sticks.ALONG_K
    assert layout["b_packing_cycles"] == 0  # K whole: each core's band of the weight is one run of it as stored


@pytest.mark.parametrize(
    ("sizes", "strides", "stick"),
    [
        ((128, 64), (64, 1), sticks.ALONG_N),
        ((128, 64), (1, 128), sticks.ALONG_K),
        ((8, 64, 96), (6144, 1, 64), sticks.ALONG_K),
        ((8, 64, 96), (64, 1, 512), None),  # batches not dense: no single offset per batch
        ((128, 64), (2, 256), None),
    ],
)
def test_stick_of_names_the_dim_a_right_operand_is_stored_along(
    sizes: tuple[int, ...], strides: tuple[int, ...], stick: int | None
) -> None:
    assert sticks.stick_of(sizes, strides) == stick


def test_a_planned_linear_reads_its_weight_and_input_as_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    _, on_kernels, _ = _run("planned gelu(linear), B overflowing a core", True, monkeypatch)
    relaid = [n for n in on_kernels if n.startswith("ring_relayout_")]
    assert relaid, on_kernels
    assert all("_store_" in n for n in relaid), on_kernels  # only the column bands' store remains


@pytest.mark.parametrize(
    ("fn", "left", "chosen"),
    [
        (lambda q, x: q @ _heads(x, 1).transpose(-2, -1), 64, "along K"),  # keys: copied as stored, read along K
        (lambda p, x: p @ _heads(x, 2), 128, "along N"),  # values: rows of N already; along K would transpose
    ],
    ids=["keys", "values"],
)
def test_a_copied_right_operand_takes_the_sticks_the_simulator_prices_cheaper(
    fn: Callable[..., Any], left: int, chosen: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config, "dump_dir", str(tmp_path))
    torch.manual_seed(0)
    inputs = (torch.randn(2, 4, 128, left).half(), torch.randn(2, 128, 768).half())
    with torch.no_grad(), ringsim.profile() as profile:
        out, _ = compiled_run(fn, *inputs)
    (decisions_file,) = tmp_path.glob("ring_operand_sticks_bmm_*.decisions.json")
    decision = json.loads(decisions_file.read_text())
    options = decision["options"]
    assert decision["chosen"] == chosen == min(options, key=lambda sticks: options[sticks]["total"])
    for option in options.values():
        assert option["total"] == option["relayout"] + option["matmul"] > option["matmul"] > 0
    bmm = next(r for r in profile.reports if r.name.startswith("ring_bmm_"))
    assert bmm.name.endswith("_along_k") == (chosen == "along K")
    assert bmm.total_cycles == pytest.approx(options[chosen]["matmul"])
    reference = float64_reference(fn, *inputs)
    assert excess(out.cpu(), reference, device_bound(torch.float16, "matmul", k=left, scale=4)) <= 0
