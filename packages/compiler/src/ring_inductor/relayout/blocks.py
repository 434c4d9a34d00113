"""The blocks scheme: a view whose inner source dims are dense, moved one block of source at a time.

The view's dims in source order (by stride) are cut at one dim: a block holds a stretch of that dim and every dim
inside it, so it is one DMA in, or one DMA per index of the dims outside the cut it also spans (which lets a block
gather what the output needs contiguous). A permute on the scratchpad puts the block in the view's order; it is
stored in runs, the longest stretches of it that are contiguous in the output. Cores take blocks in turn, two
tiles each way so loads overlap stores (one, where two do not fit). Which blocking is what a cost estimate from
the device model finds fastest: bigger blocks mean fewer DMAs, a cut further out may leave shorter runs out (a
transposed matrix stored a column of sticks at a time), and too few blocks leave cores idle.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from ringsim.engine import DEFAULT_MODEL

from ring_inductor.emit import CORES, MIN_BYTES_PER_CORE, SCRATCHPAD, STICK, align, ceil_div, dtype_name
from ring_inductor.plan.emit import Tiles, compute, dma_in, dma_out

from .views import NoFit, Relayout, grid_offsets

#: Programs with more DMAs than this are not built: planning them would cost more than the copy they replace.
MAX_DMAS = 1 << 15


@dataclass(frozen=True)
class Blocking:
    """How a view is cut into blocks (positions in source order): `stretch` elements of the dim at `cut` and every
    dim inside it whole make one contiguous piece of source; a block also spans the dims from `gather` to the cut,
    the one at `gather` for `gather_stretch` elements, one DMA in per piece. `run` is the elements of one store,
    `estimate` the cycles the device model expects."""

    gather: int
    gather_stretch: int
    cut: int
    stretch: int
    run: int
    #: two tiles each way (loads overlap stores) when they fit, else one
    slots: int
    estimate: float

    def extent(self, layout: Relayout, order: list[int]) -> dict[int, int]:
        """Each spanned view dim's elements in one block."""
        extent = {d: layout.dims[d][0] for d in order[self.gather :]}
        extent[order[self.gather]] = self.gather_stretch
        extent[order[self.cut]] = self.stretch
        return extent


def _core_shares(items: int, nbytes: int) -> list[range]:
    """The items each core takes, in order: as many cores as have MIN_BYTES_PER_CORE of `nbytes` each."""
    cores = max(1, min(CORES, items, nbytes // MIN_BYTES_PER_CORE))
    return [range(core * items // cores, (core + 1) * items // cores) for core in range(cores)]


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def source_order(layout: Relayout) -> list[int]:
    """The view's dims as they lie in memory, outermost first (broadcast dims, stride 0, outside all)."""
    return sorted(range(len(layout.dims)), key=lambda d: (layout.dims[d][1] != 0, -layout.dims[d][1]))


def _dense_from(layout: Relayout, order: list[int]) -> int:
    """The first position in `order` from which the dims walk memory densely down to a contiguous innermost one."""
    dims = layout.dims
    if not dims or dims[order[-1]][1] != 1:
        raise NoFit("no dim of the view is contiguous")
    first = len(order) - 1
    while first > 0 and dims[order[first - 1]][1] == dims[order[first]][1] * dims[order[first]][0]:
        first -= 1
    return first


def _output_strides(layout: Relayout) -> list[int]:
    sizes = [size for size, _ in layout.dims]
    return [math.prod(sizes[d + 1 :]) for d in range(len(sizes))]


def _run(layout: Relayout, extent: dict[int, int]) -> int:
    """Elements of the longest output-contiguous stretch of a block: the view's innermost dims while whole."""
    run = 1
    for d in reversed(range(len(layout.dims))):
        if d not in extent:
            break
        run *= extent[d]
        if extent[d] < layout.dims[d][0]:
            break
    return run


def _lead(layout: Relayout, extent: dict[int, int], run: int) -> list[int]:
    """The block's dims in view order that lie outside its runs (each of their index values starts a run)."""
    block_dims = [d for d in range(len(layout.dims)) if d in extent]
    covered, inner = 1, len(block_dims)
    while inner > 0 and covered < run:
        inner -= 1
        covered *= extent[block_dims[inner]]
    return block_dims[:inner]


def _aligned(layout: Relayout, order: list[int], blocking: Blocking, piece: int) -> bool:
    """Whether every DMA starts on a stick: each block's and each piece's source, each piece's place in the tile,
    and each run's output offset."""
    size, strides, out = layout.itemsize, [stride for _, stride in layout.dims], _output_strides(layout)
    outer, at_gather, at_cut = order[: blocking.gather], order[blocking.gather], order[blocking.cut]
    gathered = order[blocking.gather : blocking.cut]
    starts = [strides[e] for e in outer + gathered] + [strides[at_cut] * blocking.stretch]
    starts += [out[e] for e in outer] + [out[at_gather] * blocking.gather_stretch, out[at_cut] * blocking.stretch]
    starts += [strides[at_gather] * blocking.gather_stretch, blocking.run, piece * bool(gathered)]
    starts += [out[e] for e in _lead(layout, blocking.extent(layout, order), blocking.run)]
    return all(start * size % STICK == 0 for start in starts)


def _candidates(layout: Relayout, order: list[int]) -> Iterator[Blocking]:
    """Every blocking, unestimated: each cut from the first dense dim in, each dim out to gather from, stretches."""
    dims = layout.dims
    for cut in range(_dense_from(layout, order), len(order)):
        for gather in range(cut + 1):
            gather_stretches = _divisors(dims[order[gather]][0]) if gather < cut else [0]
            for gather_stretch, stretch in itertools.product(gather_stretches, _divisors(dims[order[cut]][0])):
                unrun = Blocking(gather, gather_stretch or stretch, cut, stretch, 0, 0, 0.0)
                yield replace(unrun, run=_run(layout, unrun.extent(layout, order)))


def blockings(layout: Relayout) -> Iterator[Blocking]:
    """Every blocking whose tiles fit a core and whose DMAs start on sticks, with its estimated cycles (the memory
    bound, or each core's blocks at its share of device memory, whichever is longer)."""
    model, size = DEFAULT_MODEL, layout.itemsize
    order = source_order(layout)
    peak, mixed = model.memory_peak_bytes_per_cycle, model.memory_mixed_bytes_per_cycle
    bound = 2 * layout.numel * size / peak
    for candidate in _candidates(layout, order):
        extent = candidate.extent(layout, order)
        piece = candidate.stretch * math.prod(layout.dims[d][0] for d in order[candidate.cut + 1 :])
        block = math.prod(extent.values()) * size
        if 2 * align(block) > SCRATCHPAD or not _aligned(layout, order, candidate, piece):
            continue
        blocks, pieces, stores = layout.numel * size // block, block // (piece * size), block // (candidate.run * size)
        if blocks * (pieces + stores) > MAX_DMAS:
            continue
        cores = len(_core_shares(blocks, layout.numel * size))
        each = ceil_div(blocks, cores)
        # a core with one block loads, then stores, as all cores do: each way in turn gets the peak; streaming
        # blocks mix loads and stores, which share the mixed bandwidth
        flow = min(model.dma_engine_bytes_per_cycle, peak / cores if each == 1 else mixed / (2 * cores))
        load = pieces * model.dma_latency_cycles + block / flow
        store = stores * model.dma_latency_cycles + block / flow
        permute = model.compute_issue_cycles + block / size / model.vector_elements_per_cycle
        serial = load + permute + store
        slots = 2 if 4 * align(block) <= SCRATCHPAD else 1
        per_core = (each - 1) * max(load, store, permute) + serial if slots == 2 else each * serial
        yield replace(candidate, slots=slots, estimate=max(per_core, bound))


def blocks_program(layout: Relayout, store: bool = False) -> list[dict[str, Any]]:
    """The program of the blocking with the lowest estimate: gathering the view into contiguous `out`, or with
    `store`, scattering contiguous `src` into the view (the same blocks the other way)."""
    chosen = min(blockings(layout), key=lambda b: b.estimate, default=None)
    if chosen is None:
        raise NoFit("no block of the view fits a core with its DMAs on sticks")
    if store and any(stride == 0 for _, stride in layout.dims):
        raise NoFit("the view writes some elements more than once")
    size, dtype, dims = layout.itemsize, dtype_name(layout.dtype), layout.dims
    strides, out = [stride for _, stride in dims], _output_strides(layout)
    order = source_order(layout)
    extent = chosen.extent(layout, order)
    spanned = order[chosen.gather :]
    block_dims = [d for d in range(len(dims)) if d in extent]  # view order
    permutation = [spanned.index(d) for d in block_dims]
    shapes = [extent[d] for d in spanned], [extent[d] for d in block_dims]
    if store:  # runs in, the inverse permute, pieces out
        permutation, shapes = [permutation.index(i) for i in range(len(permutation))], shapes[::-1]
    walked = order[: chosen.gather + 1] + ([order[chosen.cut]] if chosen.cut > chosen.gather else [])
    walk = [dims[d][0] for d in walked], [extent.get(d, 1) for d in walked]  # each block-sized step
    blocks = list(zip(grid_offsets(walk[0], [strides[d] for d in walked], walk[1]),
                      grid_offsets(walk[0], [out[d] for d in walked], walk[1]), strict=True))  # fmt: skip
    gathered = order[chosen.gather : chosen.cut]
    pieces = grid_offsets([extent[d] for d in gathered], [strides[d] for d in gathered])
    piece = chosen.stretch * math.prod(dims[d][0] for d in order[chosen.cut + 1 :])
    lead = _lead(layout, extent, chosen.run)
    runs = grid_offsets([extent[d] for d in lead], [out[d] for d in lead])
    programs = []
    for core, share in enumerate(_core_shares(len(blocks), layout.numel * size)):
        tiles = Tiles()
        slots = chosen.slots
        loaded = [tiles.add(f"in{s}", dtype, shapes[0]) for s in range(slots)]
        permuted = loaded if permutation == sorted(permutation) else [
            tiles.add(f"out{s}", dtype, shapes[1]) for s in range(slots)]  # fmt: skip
        code: list[dict[str, Any]] = []
        for n, b in enumerate(share):
            strided, dense = blocks[b]
            into, result = loaded[n % slots], permuted[n % slots]
            reads, writes = ([strided + p for p in pieces], piece), ([dense + r for r in runs], chosen.run)
            if store:
                reads, writes = writes, reads
            code += _parts(tiles, "dma_in", into, *reads, dtype, size)
            if result != into:
                code.append(compute("permute", [into], result, dims=permutation))
            code += _parts(tiles, "dma_out", result, *writes, dtype, size)
        programs.append({"core": core, "tiles": tiles.specs, "instructions": code})
    return programs


def _parts(tiles: Tiles, op: str, tile: str, offsets: list[int], length: int, dtype: str, size: int) -> list[dict]:
    """DMAs moving `tile` to or from device memory in pieces of `length` elements at `offsets` (the whole tile in
    one DMA when it is one piece)."""
    if len(offsets) == 1:
        return [dma_in("src", offsets[0] * size, tile) if op == "dma_in" else dma_out(tile, "out", offsets[0] * size)]
    base, code = tiles.specs[tile]["offset"], []
    for q, offset in enumerate(offsets):
        part = tiles.add(f"{tile}_{q}", dtype, [length], base + q * length * size)
        code.append(dma_in("src", offset * size, part) if op == "dma_in" else dma_out(part, "out", offset * size))
    return code
