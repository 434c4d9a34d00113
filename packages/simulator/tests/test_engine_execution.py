"""Programs compute what plain torch computes, under the device numerics rule; launches are charged to the stats."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import torch
from ringsim import profiling
from ringsim.engine import ProgramError, launch, launch_cached


def program(
    cores: list[dict[str, Any]], buffers: dict[str, tuple[str, list[int]]], name: str = "case"
) -> dict[str, Any]:
    return {
        "format": "ringsim-program/1",
        "name": name,
        "buffers": {key: {"dtype": dtype, "shape": shape} for key, (dtype, shape) in buffers.items()},
        "cores": cores,
    }


def tiles(**specs: tuple[int, str, list[int]]) -> dict[str, Any]:
    return {name: {"offset": offset, "dtype": dtype, "shape": shape} for name, (offset, dtype, shape) in specs.items()}


def dma_in(buffer: str, tile: str, offset: int = 0) -> dict[str, Any]:
    return {"op": "dma_in", "buffer": buffer, "offset": offset, "tile": tile}


def dma_out(tile: str, buffer: str, offset: int = 0) -> dict[str, Any]:
    return {"op": "dma_out", "tile": tile, "buffer": buffer, "offset": offset}


def compute(fn: str, inputs: list[str], output: str | list[str], **attrs: Any) -> dict[str, Any]:
    return {"op": "compute", "fn": fn, "inputs": inputs, "output": output, "attrs": attrs}


def unary(fn: str, shape: list[int], dtype: str = "float16", out_shape: list[int] | None = None, **attrs: Any):
    out_shape = out_shape or shape
    return program(
        [
            {
                "core": 0,
                "tiles": tiles(a=(0, dtype, shape), r=(65536, dtype, out_shape)),
                "instructions": [dma_in("x", "a"), compute(fn, ["a"], "r", **attrs), dma_out("r", "y")],
            }
        ],
        {"x": (dtype, shape), "y": (dtype, out_shape)},
    )


def test_dma_round_trip_copies_bytes_exactly() -> None:
    x = torch.randn(32, 64, dtype=torch.float16)
    y = torch.zeros_like(x)
    document = unary("copy", [32, 64])
    launch(document, {"x": x, "y": y})
    assert torch.equal(x, y)


def test_buffers_are_reinterpreted_as_bytes() -> None:
    x = torch.arange(64, dtype=torch.float16).view(torch.int32)  # same bytes, another dtype
    y = torch.zeros(128, dtype=torch.uint8)
    launch(unary("copy", [64]), {"x": x, "y": y})
    assert torch.equal(y.view(torch.float16), torch.arange(64, dtype=torch.float16))


@pytest.mark.parametrize("fn", ["exp", "neg", "sigmoid", "tanh", "abs"])
def test_elementwise_matches_torch_rounded_once(fn: str) -> None:
    x = torch.randn(16, 64, dtype=torch.float16)
    y = torch.empty_like(x)
    launch(unary(fn, [16, 64]), {"x": x, "y": y})
    expected = getattr(torch, fn)(x.float()).half()
    assert torch.equal(y, expected)


def test_binary_compute_and_attrs() -> None:
    shape = [8, 64]
    document = program(
        [
            {
                "core": 0,
                "tiles": tiles(a=(0, "bfloat16", shape), b=(1024, "bfloat16", shape), r=(2048, "float32", shape)),
                "instructions": [
                    dma_in("x", "a"),
                    dma_in("w", "b"),
                    compute("add", ["a", "b"], "r", alpha=2),
                    dma_out("r", "y"),
                ],
            }
        ],
        {"x": ("bfloat16", shape), "w": ("bfloat16", shape), "y": ("float32", shape)},
    )
    x, w = torch.randn(shape, dtype=torch.bfloat16), torch.randn(shape, dtype=torch.bfloat16)
    y = torch.empty(shape)
    launch(document, {"x": x, "w": w, "y": y})
    assert torch.equal(y, x.float() + 2 * w.float())


def test_matmul_accumulates_in_fp32() -> None:
    a, b = torch.randn(64, 256, dtype=torch.float16), torch.randn(256, 64, dtype=torch.float16)
    document = program(
        [
            {
                "core": 0,
                "tiles": tiles(
                    a=(0, "float16", [64, 256]), b=(32768, "float16", [256, 64]), r=(65536, "float16", [64, 64])
                ),
                "instructions": [dma_in("a", "a"), dma_in("b", "b"), compute("mm", ["a", "b"], "r"), dma_out("r", "y")],
            }
        ],
        {"a": ("float16", [64, 256]), "b": ("float16", [256, 64]), "y": ("float16", [64, 64])},
    )
    y = torch.empty(64, 64, dtype=torch.float16)
    report = launch(document, {"a": a, "b": b, "y": y})
    assert torch.equal(y, (a.float() @ b.float()).half())
    assert report.flops == 2 * 64 * 64 * 256


def test_fp16_reduction_accumulates_in_fp32() -> None:
    """A long fp16 sum: fp16 accumulation drifts by whole units, the device rule stays within one fp16 rounding."""
    n = 16384
    x = (torch.rand(1, n, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) + 0.5).half()
    y = torch.empty(1, 1, dtype=torch.float16)
    launch(unary("sum", [1, n], out_shape=[1, 1], dim=[-1], keepdim=True), {"x": x, "y": y})
    exact = x.double().sum()
    device_error = abs(y.double().item() - exact.item())
    assert device_error <= exact.item() * 2**-11  # one rounding to fp16 (unit roundoff 2^-11)
    fp16_accumulated = torch.zeros((), dtype=torch.float16)
    for chunk in x.view(-1, 64):
        fp16_accumulated = fp16_accumulated + chunk.sum(dtype=torch.float16)
    assert abs(fp16_accumulated.double().item() - exact.item()) > device_error


def test_softmax_fn_with_int_attrs() -> None:
    x = torch.randn(8, 128, dtype=torch.float16)
    y = torch.empty_like(x)
    launch(unary("_softmax", [8, 128], dim=-1, half_to_float=False), {"x": x, "y": y})
    torch.testing.assert_close(y, torch.softmax(x.float(), -1).half(), rtol=0, atol=0)


def test_multi_output_fn_and_index_tiles() -> None:
    x = torch.randn(4, 64, dtype=torch.float16)
    values, indices = torch.empty(4, 1, dtype=torch.float16), torch.empty(4, 1, dtype=torch.int64)
    document = program(
        [
            {
                "core": 0,
                "tiles": tiles(a=(0, "float16", [4, 64]), v=(1024, "float16", [4, 1]), i=(2048, "int64", [4, 1])),
                "instructions": [
                    dma_in("x", "a"),
                    compute("max.dim", ["a"], ["v", "i"], dim=1, keepdim=True),
                    dma_out("v", "values"),
                    dma_out("i", "indices"),
                ],
            }
        ],
        {"x": ("float16", [4, 64]), "values": ("float16", [4, 1]), "indices": ("int64", [4, 1])},
    )
    launch(document, {"x": x, "values": values, "indices": indices})
    expected = x.max(dim=1, keepdim=True)
    assert torch.equal(values, expected.values)
    assert torch.equal(indices, expected.indices)


def test_cast_rounds_to_the_output_dtype() -> None:
    x = torch.randn(2, 64, dtype=torch.float32)
    y = torch.empty(2, 64, dtype=torch.bfloat16)
    document = program(
        [
            {
                "core": 0,
                "tiles": tiles(a=(0, "float32", [2, 64]), r=(512, "bfloat16", [2, 64])),
                "instructions": [dma_in("x", "a"), compute("cast", ["a"], "r"), dma_out("r", "y")],
            }
        ],
        {"x": ("float32", [2, 64]), "y": ("bfloat16", [2, 64])},
    )
    launch(document, {"x": x, "y": y})
    assert torch.equal(y, x.bfloat16())


def test_overlapping_tiles_alias_the_same_bytes() -> None:
    """A [2, 64] tile and a [64] tile at its second row's offset: writing one is seen through the other."""
    document = program(
        [
            {
                "core": 0,
                "tiles": tiles(whole=(0, "float16", [2, 64]), row=(128, "float16", [64])),
                "instructions": [dma_in("x", "whole"), compute("neg", ["row"], "row"), dma_out("whole", "y")],
            }
        ],
        {"x": ("float16", [2, 64]), "y": ("float16", [2, 64])},
    )
    x = torch.randn(2, 64, dtype=torch.float16)
    y = torch.empty_like(x)
    launch(document, {"x": x, "y": y})
    assert torch.equal(y[0], x[0])
    assert torch.equal(y[1], -x[1])


def test_ring_sends_pair_in_order() -> None:
    """Core 0 sends two rows to core 1 in order; core 1 receives them into two tiles in the same order."""
    shape = [64]
    send_core = {
        "core": 0,
        "tiles": tiles(a=(0, "float16", shape), b=(128, "float16", shape)),
        "instructions": [
            dma_in("x", "a", 0),
            dma_in("x", "b", 128),
            {"op": "send", "to": 1, "tile": "a"},
            {"op": "send", "to": 1, "tile": "b"},
        ],
    }
    recv_core = {
        "core": 1,
        "tiles": tiles(first=(1024, "float16", shape), second=(0, "float16", shape)),
        "instructions": [
            {"op": "recv", "from": 0, "tile": "first"},
            {"op": "recv", "from": 0, "tile": "second"},
            dma_out("first", "y", 0),
            dma_out("second", "y", 128),
        ],
    }
    x = torch.randn(2, 64, dtype=torch.float16)
    y = torch.empty_like(x)
    report = launch(
        program([send_core, recv_core], {"x": ("float16", [2, 64]), "y": ("float16", [2, 64])}), {"x": x, "y": y}
    )
    assert torch.equal(y, x)
    assert report.ring_bytes == 256
    assert report.communication_cycles > 0


def test_barrier_orders_device_memory_between_cores() -> None:
    """Core 1 doubles what core 0 wrote to device memory; the barrier makes the write visible first."""
    shape = [64]
    writer = {
        "core": 0,
        "tiles": tiles(a=(0, "float16", shape)),
        "instructions": [dma_in("x", "a"), dma_out("a", "mid"), {"op": "barrier"}],
    }
    reader = {
        "core": 1,
        "tiles": tiles(a=(0, "float16", shape)),
        "instructions": [{"op": "barrier"}, dma_in("mid", "a"), compute("add", ["a", "a"], "a"), dma_out("a", "y")],
    }
    buffers = {"x": ("float16", shape), "mid": ("float16", shape), "y": ("float16", shape)}
    x = torch.randn(shape, dtype=torch.float16)
    mid, y = torch.zeros_like(x), torch.zeros_like(x)
    launch(program([reader, writer], buffers), {"x": x, "mid": mid, "y": y})
    assert torch.equal(y, (x.float() * 2).half())


def test_bound_buffers_must_match_the_declaration() -> None:
    document = unary("copy", [64])
    with pytest.raises(ProgramError, match="buffer 'y' is not bound"):
        launch(document, {"x": torch.zeros(64, dtype=torch.float16)})
    with pytest.raises(ProgramError, match="of 128 bytes, got 256 bytes"):
        launch(document, {"x": torch.zeros(64, dtype=torch.float16), "y": torch.zeros(64, dtype=torch.float32)})
    with pytest.raises(ProgramError, match="not contiguous"):
        launch(
            document, {"x": torch.zeros(64, 2, dtype=torch.float16)[:, 0], "y": torch.zeros(64, dtype=torch.float16)}
        )


def test_keyed_programs_are_parsed_once() -> None:
    x, y = torch.randn(64, dtype=torch.float16), torch.zeros(64, dtype=torch.float16)
    key = ("test_keyed_programs_are_parsed_once", 64)
    first = launch(unary("neg", [64]), {"x": x, "y": y}, key=key)
    again = launch({"not": "a program"}, {"x": x, "y": y}, key=key)
    assert again is first
    built = []
    third = launch_cached(key, lambda: built.append(1) or unary("neg", [64]), {"x": x, "y": y})
    assert third is first
    assert not built
    assert torch.equal(y, -x)


def test_launches_are_charged_to_stats_and_profiles() -> None:
    x, y = torch.randn(64, dtype=torch.float16), torch.zeros(64, dtype=torch.float16)
    document = unary("exp", [64])
    document["name"] = "exp_64"
    profiling.reset_stats()
    with profiling.profile() as recorded:
        report = launch(document, {"x": x, "y": y})
        launch(document, {"x": x, "y": y})
    launch(document, {"x": x, "y": y})
    totals = profiling.stats()
    assert totals["kernels"] == 3
    assert totals["by_kernel"]["exp_64"]["kernels"] == 3
    assert totals["cycles"]["total"] == round(3 * report.total_cycles)
    assert totals["bytes"] == {"read": 3 * 128, "written": 3 * 128, "ring": 0}
    assert totals["sticks"] == 6
    assert [r.name for r in recorded.reports] == ["exp_64", "exp_64"]
    assert "exp_64" in recorded.summary()
    assert recorded.summary().splitlines()[0].split()[0] == "kernel"
    profiling.reset_stats()
    assert profiling.stats()["kernels"] == 0


def test_creation_fn_without_input_tiles() -> None:
    document = program(
        [
            {
                "core": 0,
                "tiles": tiles(t=(0, "int64", [64])),
                "instructions": [
                    compute("arange.start_step", [], "t", start=0, end=64, step=1, dtype="int64"),
                    dma_out("t", "y"),
                ],
            }
        ],
        {"y": ("int64", [64])},
    )
    y = torch.zeros(64, dtype=torch.int64)
    launch(document, {"y": y})
    assert torch.equal(y, torch.arange(64))


def test_a_rotation_round_the_whole_ring() -> None:
    """Every core sends its row to the next and receives the previous one's, wrapping from core 31 to core 0."""
    example = pathlib.Path(__file__).resolve().parents[1] / "examples" / "ring_rotate_fp16.json"
    x = torch.randn(32, 1024, dtype=torch.float16)
    y = torch.zeros_like(x)
    report = launch(json.loads(example.read_text()), {"x": x, "y": y})
    assert torch.equal(y, torch.roll(x, shifts=1, dims=0))
    assert report.ring_bytes == x.nbytes
    assert len(report.per_core) == 32


def test_stats_stay_exact_when_uncached_reports_are_folded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profiling._Totals, "FOLD_AT", 2)
    x, y = torch.randn(64, dtype=torch.float16), torch.zeros(64, dtype=torch.float16)
    profiling.reset_stats()
    reports = [launch(unary("neg", [64]), {"x": x, "y": y}) for _ in range(5)]
    totals = profiling.stats()
    assert totals["kernels"] == 5
    assert totals["cycles"]["total"] == round(sum(report.total_cycles for report in reports))
    assert totals["by_kernel"]["case"]["bytes"] == 5 * 256


def test_a_fn_returning_a_view_may_write_over_its_input() -> None:
    """`t` returns a view of its float32 input; storing it into the same tile must still give the transpose."""
    document = program(
        [
            {
                "core": 0,
                "tiles": tiles(a=(0, "float32", [32, 32])),
                "instructions": [dma_in("x", "a"), compute("t", ["a"], "a"), dma_out("a", "y")],
            }
        ],
        {"x": ("float32", [32, 32]), "y": ("float32", [32, 32])},
    )
    x = torch.randn(32, 32)
    y = torch.empty_like(x)
    launch(document, {"x": x, "y": y})
    assert torch.equal(y, x.t())
