"""Strided operands of compiled kernels are relaid by programs the simulator times, not by its untimed copy."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import ringsim
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ring_inductor import config, relayout
from ring_inductor.checking import compiled_run, float64_reference
from ring_inductor.relayout import blocks
from ring_inductor.tolerance import device_bound, excess
from torch import nn

#: name -> (a CPU tensor, the strided view of its ring copy to relay, the scheme expected to win)
VIEWS: dict[str, tuple[Callable[[], torch.Tensor], Callable[[torch.Tensor], torch.Tensor], str]] = {
    "weight_t": (lambda: torch.randn(1024, 1024, dtype=torch.float16), lambda t: t.t(), "ring"),
    "tall_weight_t_in_waves": (lambda: torch.randn(8192, 1024, dtype=torch.float16), lambda t: t.t(), "ring"),
    "keys_transposed": (lambda: torch.randn(32, 512, 64, dtype=torch.float16), lambda t: t.transpose(-2, -1), "blocks"),
    # keys of a fused qkv product, transposed: source rows strided apart, each loaded by a DMA of its own
    "qkv_keys_transposed": (
        lambda: torch.randn(2, 512, 3072, dtype=torch.float16),
        lambda t: t[:, :, 1024:2048].transpose(-2, -1),
        "ring",
    ),
    "heads_permuted": (lambda: torch.randn(4, 256, 8, 64, dtype=torch.float16), lambda t: t.transpose(1, 2), "blocks"),
    "column_slice": (lambda: torch.randn(2048, 1024), lambda t: t[:, 256:768], "blocks"),
    "broadcast_bias": (lambda: torch.randn(512, dtype=torch.float16), lambda t: t.expand(256, 512), "blocks"),
    "int64_t": (lambda: torch.arange(128 * 96).reshape(128, 96), lambda t: t.t(), "blocks"),
    "bool_t": (lambda: torch.rand(256, 512) > 0.5, lambda t: t.t(), "blocks"),
}


@pytest.mark.parametrize("case", VIEWS, ids=list(VIEWS))
def test_a_strided_view_is_relaid_exactly_by_a_timed_program(case: str) -> None:
    make, view_of, scheme = VIEWS[case]
    host = make()
    view = view_of(host.to("ring"))
    with ringsim.profile() as profile:
        out = relayout.contiguous(view)
    assert out.is_contiguous()
    assert torch.equal(out.cpu(), view_of(host).contiguous())
    (report,) = profile.reports
    assert report.name.endswith(f"_{scheme}"), [c for c in relayout.choose(_layout(view)).candidates]
    moved = view.numel() * view.element_size()
    assert report.bytes_moved >= 2 * moved  # every element read and written once at least
    assert report.total_cycles >= 2 * moved / 150  # no faster than device memory's peak, reading and writing


def _layout(view: torch.Tensor) -> relayout.Relayout:
    return relayout.Relayout(relayout.normalized(tuple(view.shape), tuple(view.stride())), view.dtype)


@pytest.mark.parametrize(
    ("shape", "view_of"),
    [
        ((32, 512, 64), lambda t: t.transpose(-2, -1)),
        ((4, 256, 8, 64), lambda t: t.transpose(1, 2)),
        ((2, 128, 3, 4, 64), lambda t: t.permute(2, 0, 3, 1, 4)),
        ((1024, 1024), lambda t: t.t()),
        ((4096, 1024), lambda t: t[:, 256:768]),
    ],
    ids=["keys", "heads", "qkv", "weight", "slice"],
)
def test_the_blocking_estimate_is_what_the_simulator_measures(shape: tuple[int, ...], view_of: Callable) -> None:
    layout = _layout(view_of(torch.empty(shape, dtype=torch.float16).to("ring")))
    best = min(blocks.blockings(layout), key=lambda b: b.estimate)
    measured = next(c["cycles"] for c in relayout.choose(layout).candidates if c["scheme"] == "blocks")
    assert best.estimate == pytest.approx(measured, rel=0.05)


def test_the_fastest_scheme_that_fits_is_chosen() -> None:
    large = _layout(torch.randn(1024, 1024, dtype=torch.float16).to("ring").t())
    candidates = {c["scheme"]: c for c in relayout.choose(large).candidates}
    assert candidates["ring"]["cores"] == 32
    # through the scratchpad, a transpose's stores (or loads) are a column of sticks; the ring moves whole bands
    assert candidates["ring"]["cycles"] < candidates["blocks"]["cycles"] / 2
    both = relayout.choose(_layout(torch.randn(512, 768, dtype=torch.float16).to("ring").t()))
    cycles = {c["scheme"]: c["cycles"] for c in both.candidates if "cycles" in c}
    assert set(cycles) == {"blocks", "ring"}
    assert both.name + "_" + min(cycles, key=cycles.__getitem__) == both.program.name
    small = relayout.choose(_layout(torch.randn(256, 512, dtype=torch.float16).to("ring").t()))
    assert "faster by one core" in {c["scheme"]: c for c in small.candidates}["ring"]["refused"]


def test_a_kernel_that_only_copies_a_strided_view_is_its_relayout_alone() -> None:
    host = torch.randn(4, 512, 8, 128, dtype=torch.float16)
    fn = lambda x: x.transpose(1, 2).reshape(32, 512, 128)  # noqa: E731 - Inductor clones the permuted view
    with ringsim.profile() as profile:
        out, kernels = compiled_run(fn, host)
    assert torch.equal(out.cpu(), fn(host))
    assert [r.name.startswith("ring_relayout_") for r in profile.reports] == [True], kernels


@pytest.mark.parametrize(
    ("view_of", "reason"),
    [
        (lambda t: t[:, ::2], "no dim of the view is contiguous"),
        (lambda t: t[:, 3:67], "on"),  # the view starts off a stick
        (lambda t: t[:, :40], "DMAs on sticks"),  # rows of 160 bytes
    ],
    ids=["every_other_column", "misaligned_start", "short_runs"],
)
def test_a_view_no_scheme_fits_falls_back_to_the_device_copy(view_of: Callable, reason: str) -> None:
    host = torch.randn(64, 128)
    view = view_of(host.to("ring"))
    with ringsim.profile() as profile:
        out = relayout.contiguous(view)
    assert torch.equal(out.cpu(), view_of(host).contiguous())
    assert not any(r.name.startswith("ring_relayout") for r in profile.reports)
    if relayout.runtime.device_address(view) % relayout.STICK == 0:
        chosen = relayout.choose(_layout(view))
        assert chosen.program is None
        assert any(reason in c.get("refused", "") for c in chosen.candidates), chosen.candidates


def test_a_compiled_kernel_reading_a_transpose_runs_a_relayout_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config, "dump_dir", str(tmp_path))
    x, y = torch.randn(512, 1024, dtype=torch.float16), torch.randn(1024, 512, dtype=torch.float16)
    fn = lambda x, y: torch.relu(x.t() + y)  # noqa: E731
    out, kernels = compiled_run(fn, x, y)
    assert any(name.startswith("ring_relayout_float16_") for name in kernels), kernels
    assert torch.equal(out.cpu(), fn(x.float(), y.float()).half())
    (decisions_file,) = tmp_path.glob("ring_relayout_*.decisions.json")
    decisions = json.loads(decisions_file.read_text())
    schemes = [c["scheme"] for c in decisions["candidates"]]
    assert schemes == list(relayout.SCHEMES)
    assert decisions["chosen"].endswith("_ring")


def test_switching_relayout_programs_off_restores_the_untimed_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "relayout_programs", False)
    view = torch.randn(1024, 1024, dtype=torch.float16).to("ring").t()
    with ringsim.profile() as profile:
        relayout.contiguous(view)
    assert not any(r.name.startswith("ring_relayout") for r in profile.reports)


def test_a_compiled_linear_layer_overflowing_a_core_needs_no_relayout_and_stays_within_bounds() -> None:
    """Its weight is read as stored (the layout pass) and the row ring stores whole rows of the result."""
    torch.manual_seed(0)
    layer = nn.Linear(1024, 1024, bias=False).half()
    x = torch.randn(256, 1024, dtype=torch.float16)
    with torch.no_grad():
        reference = float64_reference(lambda x: x @ layer.weight.double().t(), x)
        out, kernels = compiled_run(layer.to("ring"), x)
    assert list(kernels) == ["ring_mm_planned_256x1024_1024x1024_float16_along_k"], kernels
    assert excess(out, reference, device_bound(torch.float16, "matmul", k=1024, scale=4)) <= 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.lists(st.sampled_from([1, 2, 3, 8, 32, 64, 128]), min_size=2, max_size=4),
    dtype=st.sampled_from([torch.float16, torch.float32, torch.int64]),
    data=st.data(),
)
def test_any_permuted_or_sliced_view_is_relaid_exactly(shape: list[int], dtype: torch.dtype, data) -> None:
    host = (torch.randn(shape) * 100).to(dtype)
    order = data.draw(st.permutations(range(len(shape))))
    view_of = lambda t: t.permute(*order)  # noqa: E731
    if data.draw(st.booleans()) and shape[-1] > 2:
        stop = data.draw(st.integers(1, shape[-1]))
        view_of = lambda t: t[..., :stop].permute(*order)  # noqa: E731
    view = view_of(host.to("ring"))
    assert torch.equal(relayout.contiguous(view).cpu(), view_of(host).contiguous())


@pytest.mark.parametrize(
    ("shape", "dtype", "view_of"),
    [
        ((64, 128), torch.float32, lambda t: t[:, 32:96]),  # the columns either side stay as they were
        ((512, 256), torch.float16, lambda t: t.t()),
        ((4, 256, 8, 64), torch.float16, lambda t: t.transpose(1, 2)),
    ],
    ids=["slice", "transpose", "heads"],
)
def test_a_store_into_a_strided_view_is_a_timed_program(shape: tuple[int, ...], dtype: torch.dtype, view_of) -> None:
    host = torch.randn(shape).to(dtype)
    device = host.to("ring")
    values = torch.randn(view_of(host).shape).to(dtype)
    with ringsim.profile() as profile:
        relayout.store(view_of(device), values.to("ring"))
    view_of(host).copy_(values)
    assert torch.equal(device.cpu(), host)
    (report,) = profile.reports
    assert report.name.endswith("_store_blocks")


def test_a_store_into_a_broadcast_view_is_left_to_the_device_copy() -> None:
    view = torch.zeros(1, 128).to("ring").expand(4, 128)
    chosen = relayout.choose(_layout(view), store=True)
    assert chosen.program is None
    assert "more than once" in chosen.candidates[0]["refused"]
