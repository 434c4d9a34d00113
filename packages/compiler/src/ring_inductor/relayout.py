"""Strided ring tensors made contiguous by relayout programs that the simulator runs and times.

Compiled kernels read their operands contiguous and stick-aligned; `linear`'s transposed weight, attention's
`k.transpose(-2, -1)`, a slice or a planned matmul's blocks are not. The device's copy kernel would make them so
without being timed. Here each becomes a program instead, the fastest by the simulator's own timing of those that
fit its layout:

- `local`: every matrix of a (batched) transpose fits one core, and cores take whole matrices: the matrix in, a
  permute on the scratchpad (the restickify), the transpose out;
- `ring`: each matrix is cut into bands of source rows, one per core; each core permutes its band, whose pieces
  travel round the ring to the cores whose band of output rows they belong to, and each core permutes the pieces
  it gathered into whole output rows: every DMA moves one contiguous band;
- `runs`: a view whose innermost dim is contiguous (a slice, a permutation that keeps the last dim) moves run by
  run into chunks, each stored whole.

A view none of them fits (a start or a run off the stick, an inner stride that is no transpose) goes through the
device's copy; the dump says why. `config.relayout_programs = False` sends every view there (the untimed baseline).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from ringsim import runtime
from ringsim.engine import FORMAT, Program, ProgramError, launch, parse_program, plan

from ring_inductor import config, dump
from ring_inductor.emit import CORES, MIN_BYTES_PER_CORE, SCRATCHPAD, STICK, align, dtype_name
from ring_inductor.plan.emit import Tiles, compute, dma_in, dma_out, recv, send

#: Matrices up to this size are not tried over the ring: one core's transpose is faster (measured with
#: `benchmarks/relayout.py`: a 512x512 fp16 transpose takes 10,656 cycles on one core, 10,923 over the ring).
RING_MIN_BYTES = 512 * 1024
#: (size, stride) per dim, outermost first, in elements.
Dims = tuple[tuple[int, int], ...]


class NoFit(Exception):
    """A relayout scheme cannot serve this view; the message says why."""


@dataclass(frozen=True)
class Relayout:
    """A view's elements in device memory: its dims (size-1 dims dropped, dims that walk memory as one merged)."""

    dims: Dims
    dtype: torch.dtype

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def numel(self) -> int:
        return math.prod(size for size, _ in self.dims)

    @property
    def span(self) -> int:
        """Elements from the view's first to its last, the source buffer's extent."""
        return 1 + sum((size - 1) * stride for size, stride in self.dims)


def normalized(sizes: tuple[int, ...], strides: tuple[int, ...]) -> Dims:
    dims: list[tuple[int, int]] = []
    for size, stride in zip(sizes, strides, strict=True):
        if size == 1:
            continue
        if dims and dims[-1][1] == stride * size:
            dims[-1] = (dims[-1][0] * size, stride)
        else:
            dims.append((size, stride))
    return tuple(dims)


def _offsets(dims: Dims) -> list[int]:
    """The start of every element of `dims`, in row-major order."""
    offsets = [0]
    for size, stride in dims:
        offsets = [o + i * stride for o in offsets for i in range(size)]
    return offsets


def _on_sticks(what: str, elements: int, itemsize: int) -> None:
    if elements * itemsize % STICK:
        raise NoFit(f"{what} ({elements * itemsize} bytes) is not whole sticks")


def _transpose(layout: Relayout) -> tuple[list[int], int, int, int]:
    """A batched transpose's matrix starts, source rows, row length and row stride (the view is [..., c, r])."""
    if len(layout.dims) < 2 or layout.dims[-2][1] != 1:
        raise NoFit("the view is not a transpose of its last two dims")
    *batch, (c, _), (r, row_stride) = layout.dims
    for _, stride in batch:
        _on_sticks("a matrix stride", stride, layout.itemsize)
    _on_sticks("a source row stride", row_stride, layout.itemsize)
    starts = _offsets(tuple(batch))
    if len(starts) > 1:
        _on_sticks("a transposed matrix", r * c, layout.itemsize)
    return starts, r, c, row_stride


def _shares(items: int, cores: int) -> list[range]:
    return [range(core * items // cores, (core + 1) * items // cores) for core in range(cores)]


def _cores(items: int, nbytes: int) -> int:
    return max(1, min(CORES, items, nbytes // MIN_BYTES_PER_CORE))


def local_program(layout: Relayout) -> list[dict[str, Any]]:
    """Each core transposes whole matrices: one DMA in (a row each if rows are strided), a permute, one DMA out."""
    starts, r, c, row_stride = _transpose(layout)
    size, dtype = layout.itemsize, dtype_name(layout.dtype)
    if row_stride != c:
        _on_sticks("a strided source row", c, size)
    matrix = align(r * c * size)
    if 2 * matrix > SCRATCHPAD:
        raise NoFit(f"a {r}x{c} matrix and its transpose overflow a core's scratchpad")
    slots = 2 if 4 * matrix <= SCRATCHPAD else 1
    programs = []
    for core, share in enumerate(_shares(len(starts), _cores(len(starts), len(starts) * r * c * size))):
        tiles = Tiles()
        xs = [tiles.add(f"x{s}", dtype, [r, c]) for s in range(slots)]
        ys = [tiles.add(f"y{s}", dtype, [c, r]) for s in range(slots)]
        code: list[dict[str, Any]] = []
        for n, m in enumerate(share):
            x, y = xs[n % slots], ys[n % slots]
            if row_stride == c:
                code.append(dma_in("src", starts[m] * size, x))
            else:
                base = tiles.specs[x]["offset"]
                for j in range(r):
                    row = tiles.add(f"{x}_{j}", dtype, [c], base + j * c * size)
                    code.append(dma_in("src", (starts[m] + j * row_stride) * size, row))
            code.append(compute("permute", [x], y, dims=[1, 0]))
            code.append(dma_out(y, "out", m * r * c * size))
        programs.append({"core": core, "tiles": tiles.specs, "instructions": code})
    return programs


def _ring_band(r: int, c: int, size: int) -> int:
    """The most source rows per core and wave whose four band tiles fit and whose pieces are whole sticks."""
    if c % CORES or r % CORES:
        raise NoFit(f"a {r}x{c} matrix does not cut into {CORES} bands each way")
    for rows in sorted((d for d in range(1, r // CORES + 1) if r // CORES % d == 0), reverse=True):
        pieces_ok = (c // CORES) * rows * size % STICK == 0 and rows * c * size % STICK == 0
        single = rows * CORES == r
        rows_ok = single or (rows * CORES * size % STICK == 0 and r * size % STICK == 0)
        if 4 * align(rows * c * size) <= SCRATCHPAD and pieces_ok and rows_ok:
            return rows
    raise NoFit(f"no band of a {r}x{c} matrix fits a core in whole sticks")


def ring_program(layout: Relayout) -> list[dict[str, Any]]:
    """Every core takes a band of each matrix's source rows and ends with a band of its output rows. Each permuted
    band travels round the ring as a bundle of the pieces the cores ahead need, in the order they meet them: each
    core keeps the first piece and forwards the rest, so a link carries each piece once per hop it still has to go."""
    starts, r, c, row_stride = _transpose(layout)
    if row_stride != c:
        raise NoFit("source rows are not contiguous")
    size, dtype = layout.itemsize, dtype_name(layout.dtype)
    if r * c * size <= RING_MIN_BYTES:
        raise NoFit(f"a matrix of {r * c * size} bytes is transposed faster by one core")
    rows = _ring_band(r, c, size)
    cc = c // CORES
    band = align(rows * c * size)
    piece = cc * rows * size
    programs = []
    for core in range(CORES):
        tiles = Tiles()
        x = tiles.add("x", dtype, [rows, c], 0)
        tiles.add("z", dtype, [CORES, cc, rows], 0)  # reuses x's bytes once x is permuted
        tiles.add("xt", dtype, [c, rows], band)
        result = tiles.add("yt", dtype, [cc, CORES * rows], band)  # reuses xt's bytes once the bundle is made
        lines = [tiles.add(f"yt{i}", dtype, [CORES * rows], band + i * CORES * rows * size) for i in range(cc)]
        code: list[dict[str, Any]] = []
        for m, start in enumerate(starts):
            for first in range(0, r, CORES * rows):
                code.append(dma_in("src", (start + (first + core * rows) * c) * size, x))
                code.append(compute("permute", [x], "xt", dims=[1, 0]))
                code += _exchange(tiles, core, dtype, cc, rows, band, piece)
                code.append(compute("permute", ["z"], result, dims=[1, 0, 2]))
                if CORES * rows == r:  # the band of output rows is whole rows: one DMA
                    code.append(dma_out(result, "out", (m * r * c + core * cc * r) * size))
                else:
                    code += [dma_out(line, "out", (m * r * c + (core * cc + i) * r + first) * size)
                             for i, line in enumerate(lines)]  # fmt: skip
        programs.append({"core": core, "tiles": tiles.specs, "instructions": code})
    return programs


def _exchange(tiles: Tiles, core: int, dtype: str, cc: int, rows: int, band: int, piece: int) -> list[dict[str, Any]]:
    """From `xt` (this core's permuted band, pieces in core order) to `z` (every core's piece for this core, in
    core order): the own piece copied, the pieces of the 16 cores ahead sent one way round the ring and those of
    the 15 behind the other way, so both directions of every link carry a share."""

    def part(name: str, base: int, first: int, count: int) -> str:
        return tiles.add(name, dtype, [count * cc, rows], base + first * piece)

    slots = [part(f"z{k}", 0, k, 1) for k in range(CORES)]
    code = [compute("copy", [part("xt_own", band, core, 1)], slots[core])]
    half = align(CORES // 2 * piece)
    chains = [(1, CORES // 2, (2 * band, 2 * band + half)), (-1, CORES - 1 - CORES // 2, (3 * band, 3 * band + half))]
    steps: list[list[dict[str, Any]]] = [[] for _ in range(CORES // 2 + 1)]
    for direction, count, buffers in chains:
        # the bundle lists its pieces in core order; the nearest core is first going up the ring, last going down
        hops = range(1, count + 1) if direction == 1 else range(count, 0, -1)
        at = 0
        for run in _runs_of([(core + direction * h) % CORES for h in hops]):
            source = part(f"xt_{run[0]}", band, run[0], len(run))
            code.append(compute("copy", [source], part(f"b{direction}_{at}", buffers[0], at, len(run))))
            at += len(run)
        for step in range(1, count + 1):
            sent = count + 1 - step
            first = 0 if step == 1 or direction == -1 else 1  # going up, the piece kept last hop leads the bundle
            bundle = part(f"send{direction}_{step}", buffers[(step - 1) % 2], first, sent)
            arrived = part(f"recv{direction}_{step}", buffers[step % 2], 0, sent)
            kept = part(f"kept{direction}_{step}", buffers[step % 2], 0 if direction == 1 else sent - 1, 1)
            steps[step] += [
                send((core + direction) % CORES, bundle),
                recv((core - direction) % CORES, arrived),
                compute("copy", [kept], slots[(core - direction * step) % CORES]),
            ]
    return code + [instruction for step in steps for instruction in step]


def _runs_of(cores: list[int]) -> list[list[int]]:
    """`cores` cut where the next is not the one after: each run is one contiguous range of pieces."""
    runs: list[list[int]] = []
    for c in cores:
        if runs and c == runs[-1][-1] + 1:
            runs[-1].append(c)
        else:
            runs.append([c])
    return runs


def runs_program(layout: Relayout) -> list[dict[str, Any]]:
    """A view with a contiguous innermost dim: each core gathers a share of its runs, one DMA a run (or a piece of
    one), into a chunk stored with one DMA; two chunks alternate so loads overlap stores."""
    if not layout.dims or layout.dims[-1][1] != 1:
        raise NoFit("the innermost dim is not contiguous")
    *outer, (length, _) = layout.dims
    size, dtype = layout.itemsize, dtype_name(layout.dtype)
    _on_sticks(f"a run of {length} elements", length, size)
    for _, stride in outer:
        _on_sticks("a run stride", stride, size)
    capacity = SCRATCHPAD // 2 // STICK * STICK // size
    piece = min(length, capacity)
    segments = [(start + p, n * length + p, min(piece, length - p))
                for n, start in enumerate(_offsets(tuple(outer))) for p in range(0, length, piece)]  # fmt: skip
    programs = []
    for core, share in enumerate(_shares(len(segments), _cores(len(segments), layout.numel * size))):
        tiles = Tiles()
        chunks: list[list[tuple[int, int, int]]] = [[]]
        for segment in (segments[i] for i in share):
            if sum(n for *_, n in chunks[-1]) + segment[2] > capacity:
                chunks.append([])
            chunks[-1].append(segment)
        code: list[dict[str, Any]] = []
        for index, chunk in enumerate(chunks):
            base = (index % 2) * capacity * size
            filled = 0
            for source, _, n in chunk:
                slot = tiles.add(f"b{index % 2}_{filled}_{n}", dtype, [n], base + filled * size)
                code.append(dma_in("src", source * size, slot))
                filled += n
            whole = tiles.add(f"b{index % 2}_{filled}", dtype, [filled], base)
            code.append(dma_out(whole, "out", chunk[0][1] * size))
        programs.append({"core": core, "tiles": tiles.specs, "instructions": code})
    return programs


SCHEMES: dict[str, Callable[[Relayout], list[dict[str, Any]]]] = {
    "local": local_program,
    "ring": ring_program,
    "runs": runs_program,
}


@dataclass(frozen=True)
class Chosen:
    """The fastest scheme that fits a view (None: the device copy), and what every scheme came to, for the dump."""

    name: str
    program: Program | None
    candidates: tuple[dict[str, Any], ...]


def _name(layout: Relayout) -> str:
    dims = "_".join(f"{size}s{stride}" for size, stride in layout.dims)
    return f"ring_relayout_{dtype_name(layout.dtype)}_{dims}"


@functools.cache
def choose(layout: Relayout) -> Chosen:
    """Build every scheme that fits `layout`, time each on the simulator's model, keep the fastest."""
    name = _name(layout)
    buffers = {
        "src": {"dtype": dtype_name(layout.dtype), "shape": [layout.span]},
        "out": {"dtype": dtype_name(layout.dtype), "shape": [layout.numel]},
    }
    candidates: list[dict[str, Any]] = []
    best: tuple[float, Program, dict[str, Any]] | None = None
    for scheme, build in SCHEMES.items():
        try:
            document = {"format": FORMAT, "name": f"{name}_{scheme}", "buffers": buffers, "cores": build(layout)}
            program = parse_program(document)
            report = plan(program).report
        except (NoFit, ProgramError) as why:
            candidates.append({"scheme": scheme, "refused": str(why)})
            continue
        candidates.append({"scheme": scheme, "cycles": report.total_cycles, "cores": len(document["cores"])})
        if best is None or report.total_cycles < best[0]:
            best = (report.total_cycles, program, document)
    decisions = {"kernel": name, "dtype": dtype_name(layout.dtype), "dims": [list(d) for d in layout.dims],
                 "candidates": candidates, "chosen": best[2]["name"] if best else "device copy"}  # fmt: skip
    dump.write(name, best[2] if best else None, decisions)
    return Chosen(name, best[1] if best else None, tuple(candidates))


def contiguous(t: torch.Tensor) -> torch.Tensor:
    """`t`'s values in a new contiguous, stick-aligned ring tensor: by the chosen relayout program, else by the
    device's copy (which the simulator does not time)."""
    layout = Relayout(normalized(tuple(t.shape), tuple(t.stride())), t.dtype)
    programmable = config.relayout_programs and t.numel() and runtime.device_address(t) % STICK == 0
    chosen = choose(layout) if programmable else None
    if chosen is None or chosen.program is None:
        return t.contiguous() if not t.is_contiguous() else t.clone()
    source = torch.as_strided(t, (layout.span,), (1,), t.storage_offset())
    out = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    launch(chosen.program, {"src": runtime.host_view(source), "out": runtime.host_view(out)},
           key=("ring_inductor", chosen.name))  # fmt: skip
    return out


def stick_aligned(t: torch.Tensor) -> torch.Tensor:
    """`t` itself when a DMA can read it as it is (contiguous, on a stick), else `contiguous(t)`."""
    return t if t.is_contiguous() and runtime.device_address(t) % STICK == 0 else contiguous(t)
