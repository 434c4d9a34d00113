"""Compiled matmuls whose right operand overflows a core run the planning layer's division and tiling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from ring_inductor import config
from ring_inductor.checking import compiled_run, float64_reference
from ring_inductor.tolerance import device_bound, excess
from torch import nn


@pytest.mark.parametrize(
    ("shapes", "dtype"),
    [
        ([(256, 1024), (1024, 1024)], torch.float16),  # B is 2 MiB: more than a core's scratchpad
        ([(2048, 1024), (1024, 3072)], torch.float16),
        ([(512, 1024), (1024, 1024)], torch.float32),
    ],
    ids=["fp16", "fp16_wide", "fp32"],
)
def test_a_matmul_too_big_for_whole_b_is_planned(shapes: list[tuple[int, int]], dtype: torch.dtype) -> None:
    a, b = torch.randn(*shapes[0], dtype=dtype), (torch.randn(*shapes[1]) / 32).to(dtype)
    fn = lambda a, b: a @ b  # noqa: E731
    out, kernels = compiled_run(fn, a, b)
    assert any(k.startswith("ring_mm_planned_") for k in kernels), kernels
    bound = device_bound(dtype, "matmul", k=shapes[0][1], scale=4)
    assert excess(out, float64_reference(fn, a, b), bound) <= 0


def test_a_linear_layer_adds_its_bias_in_the_planned_divisions_tiles() -> None:
    torch.manual_seed(0)
    layer = nn.Linear(1024, 1024).half()
    x = torch.randn(128, 1024, dtype=torch.float16)
    with torch.no_grad():
        reference = layer.double()(x.double())
        out, kernels = compiled_run(layer.half().to("ring"), x)
    # one kernel: each output tile's fp32 accumulator plus the bias, rounded to fp16 once
    assert [k for k in kernels if not k.startswith("ring_relayout_")] == ["ring_addmm_0"], kernels
    err = (out.cpu().double() - reference).abs().max().item()
    assert err <= 2.0**-11 * reference.abs().max().item() + 1e-3, err


def test_the_dump_holds_the_division_and_every_candidate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "dump_dir", str(tmp_path))
    compiled_run(lambda a, b: a @ b, torch.randn(64, 2048, dtype=torch.float16), torch.randn(2048, 512).half())
    (decisions_file,) = tmp_path.glob("ring_mm_planned_*.decisions.json")
    decisions = json.loads(decisions_file.read_text())
    division = decisions["division"]
    # a grid gives each of the 32 cores one output block; the ring scheme shares each row block among all 32
    cores = division["m_parts"] * division["n_parts"] if division["scheme"] == "grid" else division["n_parts"]
    assert cores == 32, division
    estimates = [candidate["estimate"] for candidate in decisions["considered"]]
    assert estimates == sorted(estimates)
    assert division["estimate"] == estimates[0]


def test_a_shape_no_division_fits_names_it() -> None:
    a, b = torch.randn(128, 1000, dtype=torch.float16), torch.randn(1000, 1000, dtype=torch.float16)
    with pytest.raises(Exception, match=r"mm \[128, 1000\] x \[1000, 1000\] \(float16\): B overflows a core and"):
        compiled_run(lambda a, b: a @ b, a, b)
