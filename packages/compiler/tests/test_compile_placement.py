"""Compiled kernels place their chunk tiles with the planning layer's scratchpad solvers: a dead tile's bytes are
reused, so kernels whose tiles would not fit side by side compile and run, and no two live tiles share a byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from ring_inductor import config, placement
from ring_inductor.checking import compiled_kernels, compiled_run, float64_reference
from ring_inductor.placement import Lifetime, buffers, lifetimes, needed, place
from ring_inductor.tolerance import device_bound, excess


def _long_chain(x: torch.Tensor) -> torch.Tensor:
    """Twelve pointwise steps: 24 float32 tiles a row in one kernel, three of them live at once."""
    for _ in range(12):
        x = torch.sin(x) * 1.01 + 0.1
    return x


def _long_chain_then_sum(x: torch.Tensor) -> torch.Tensor:
    return _long_chain(x).sum(-1)


@pytest.fixture
def dump_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(config, "dump_dir", str(tmp_path))
    return tmp_path


def _decisions(dump_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(dump_dir.glob("*.decisions.json"))]


def test_a_step_output_never_shares_bytes_with_its_inputs() -> None:
    steps = [([], ["a"]), (["a"], ["b"]), (["b"], ["c"]), (["c"], [])]
    tiles = lifetimes(steps, {"a": 4, "b": 4, "c": 4})
    assert [(t.tile, t.start, t.end) for t in tiles] == [("a", 0, 2), ("b", 1, 3), ("c", 2, 4)]
    # a and c never live at once, so two tiles' worth suffices; stacked keeps all three
    assert needed(tiles, 32, "best-fit") == 2 * 128
    assert needed(tiles, 32, "stacked") == 3 * 128
    placement = place(tiles, 32, 2 * 128, "best-fit")
    assert not placement.spilled
    assert placement.offsets["a"] == placement.offsets["c"] != placement.offsets["b"]


@pytest.mark.parametrize("solver", ["stacked", "greedy", "best-fit", "cp-sat"])
def test_every_solver_places_without_overlap(solver: str) -> None:
    tiles = [Lifetime(f"t{n}", 64 * (n % 3 + 1), n, n + 3) for n in range(9)]
    placement = place(tiles, 8, 1 << 20, solver)
    assert not placement.spilled
    assert placement.peak >= placement.load


def test_reused_tiles_keep_whole_rows_that_side_by_side_tiles_cannot(
    dump_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = torch.randn(256, 2048)
    out, kernels = compiled_run(_long_chain_then_sum, x)
    assert sum(compiled_kernels(kernels).values()) == 1, kernels
    bound = device_bound(torch.float32, "reduction", k=2048, scale=16)
    assert excess(out, float64_reference(_long_chain_then_sum, x), bound) <= 0
    (decisions,) = _decisions(dump_dir)
    pad = decisions["scratchpad"]
    assert pad["solver"] == "best-fit"
    assert pad["peak"] == pad["load"] < pad["stacked"] / 10
    # side by side, no chunk of whole rows fits: the kernel has to walk its rows in column chunks instead
    for stale in dump_dir.iterdir():
        stale.unlink()
    monkeypatch.setattr(config, "scratchpad_solver", "stacked")
    out, _ = compiled_run(_long_chain_then_sum, x)
    assert excess(out, float64_reference(_long_chain_then_sum, x), bound) <= 0
    (decisions,) = _decisions(dump_dir)
    assert "split" not in decisions
    assert decisions["loop"]["col_chunk"] < 2048


def test_dumped_tiles_live_at_once_never_share_a_byte(dump_dir: Path) -> None:
    x = torch.randn(512, 384, dtype=torch.float16)
    w, b = torch.rand(384, dtype=torch.float16) + 0.5, torch.randn(384, dtype=torch.float16)
    fn = lambda x, w, b: torch.nn.functional.layer_norm(x, (384,), w, b).sigmoid() * x  # noqa: E731
    out, _ = compiled_run(fn, x, w, b)
    bound = device_bound(torch.float16, "normalization", k=384, scale=4)
    assert excess(out, float64_reference(fn, x, w, b), bound) <= 0
    (decisions,) = _decisions(dump_dir)
    tiles = decisions["scratchpad"]["tiles"]
    assert len(tiles) > 3
    for n, first in enumerate(tiles):
        for second in tiles[n + 1 :]:
            live_together = first["start"] < second["end"] and second["start"] < first["end"]
            apart = (first["offset"] + first["bytes"] <= second["offset"]
                     or second["offset"] + second["bytes"] <= first["offset"])  # fmt: skip
            assert apart or not live_together, (first, second)


def test_more_rows_fit_a_chunk_than_with_stacked_tiles(dump_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.randn(64, 16384)
    chunks = {}
    for solver in ("stacked", "best-fit"):
        monkeypatch.setattr(config, "scratchpad_solver", solver)
        out, _ = compiled_run(_long_chain, x)
        bound = device_bound(torch.float32, "transcendental", scale=24)
        assert excess(out, float64_reference(_long_chain, x), bound) <= 0
        (decisions,) = _decisions(dump_dir)
        chunks[solver] = decisions["split"]["chunk"]
        for stale in dump_dir.iterdir():
            stale.unlink()
    assert chunks["best-fit"] > chunks["stacked"], chunks


def test_an_unknown_solver_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "scratchpad_solver", "first-fit")
    with pytest.raises(Exception, match=r"scratchpad_solver: unknown solver 'first-fit' \(one of stacked, greedy"):
        compiled_run(lambda x: x + 1, torch.randn(64, 64))


def test_a_tile_spill_costs_its_bytes_out_once_and_back_for_every_read() -> None:
    steps = [([], ["a"]), (["a"], ["b"]), (["a", "b"], ["c"]), (["c"], [])]
    tiles = lifetimes(steps, {"a": 4, "b": 4, "c": 4})
    assert {t.tile: t.reads for t in tiles} == {"a": 2, "b": 1, "c": 1}
    traffic = {b.name: b.traffic for b in buffers(tiles, 32)}
    assert traffic == {"a": 128 * 3, "b": 128 * 2, "c": 128 * 2}


def test_the_solver_asked_for_is_the_one_every_decision_uses(dump_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fusion decisions and the emitted kernel alike: no other solver stands in for CP-SAT."""
    asked: list[str] = []
    real = placement.allocate

    def recording(placed, capacity, solver, time_limit=None):
        asked.append(solver)
        return real(placed, capacity, solver, time_limit=time_limit)

    monkeypatch.setattr(placement, "allocate", recording)
    monkeypatch.setattr(config, "scratchpad_solver", "cp-sat")
    x = torch.randn(64, 256)
    softmax = lambda t: torch.softmax(t * 2, -1)  # noqa: E731 - three scheduler nodes: fusion asks the solver
    out, _ = compiled_run(softmax, x)
    bound = device_bound(torch.float32, "normalization", k=256, scale=4)
    assert excess(out, float64_reference(softmax, x), bound) <= 0
    assert asked
    assert set(asked) == {"cp-sat"}
    (decisions,) = _decisions(dump_dir)
    assert decisions["scratchpad"]["solver"] == "cp-sat"
