"""The K-split reduction program: the reduced elements of few rows spread over the cores, partials combined on the ring.

The row kernel keeps each row whole in one tile, which fails for a row longer than a scratchpad and leaves cores
idle when there are few rows. Here the (R, K) operand is cut, as one flat array, into contiguous stick-aligned slices,
one per core. Each core reduces the piece of every row its slice holds, chunk by chunk, into a float32 partial
(float64 for held float64, int64 for integers); each row's partial, padded with the reduction's identity to a row of
R partials, is combined into the core's row. The partial rows then travel the ring to core 0, each core combining
what it receives with its own, in two chains meeting at core 0 (with 32 cores: 16 -> ... -> 1 -> 0 and
17 -> ... -> 31 -> 0), so the latency is 16 hops, not 31; core 0 finishes (a cast, or mean's one division by K, each
rounding once) and writes the result.

Arg reductions carry (value, index) pairs: a piece's index is its local one plus the piece's offset in its row, and a
pair is combined by ``max.dim``/``min.dim`` over a (2, n) tile whose row 0 is the earlier operand, so ties keep the
first occurrence and NaN counts as the extreme with the first NaN winning, as on CPU. The identity (-inf for
argmax, index 0) may win a tie, but a partial of value -inf decides the result only when the whole row is -inf, whose
answer is index 0.

var/std (and logsumexp) have no combine here: over a row too long for one scratchpad they stay refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ringsim.engine import DEFAULT_MODEL
from ringsim.engine.dtypes import DTYPE_NAMES
from ringsim.ops.programs import CORES, MIN_BYTES_PER_CORE, SCRATCHPAD, STICK, TooLargeError

#: Most rows one K-split program reduces: its partial rows (value, index, pair) stay a small part of a scratchpad.
MAX_ROWS = 4096
#: Columns of a pair tile are padded to this count, so its second row starts on a stick (4- and 8-byte partials).
_WIDTH = STICK // 4


@dataclass(frozen=True)
class Reduction:
    """How one reduction splits: the fn reducing a chunk tile, the fn combining two partials, the identity."""

    chunk: str
    combine: str  # elementwise on two partial rows, or (indexed) the pair fn over a (2, n) tile
    identity: str  # "zero", "one", "low" (max-like) or "high" (min-like)
    chunk_attrs: dict[str, Any] = field(default_factory=dict)
    indexed: bool = False
    mean: bool = False


_DIMS, _DIM = {"dim": [0]}, {"dim": 0}
#: The reductions with a K split, by the fn the row kernel would run.
REDUCTIONS: dict[str, Reduction] = {
    "sum.dim_IntList": Reduction("sum.dim_IntList", "add.Tensor", "zero", _DIMS),
    "nansum": Reduction("nansum", "add.Tensor", "zero", _DIMS),
    "mean.dim": Reduction("sum.dim_IntList", "add.Tensor", "zero", _DIMS, mean=True),
    "prod.dim_int": Reduction("prod.dim_int", "mul.Tensor", "one", _DIM),
    "amax": Reduction("amax", "maximum", "low", _DIMS),
    "amin": Reduction("amin", "minimum", "high", _DIMS),
    "max.dim": Reduction("max.dim", "max.dim", "low", _DIM, indexed=True),
    "min.dim": Reduction("min.dim", "min.dim", "high", _DIM, indexed=True),
    "argmax": Reduction("max.dim", "max.dim", "low", _DIM, indexed=True),
    "argmin": Reduction("min.dim", "min.dim", "high", _DIM, indexed=True),
}


def split_cores(rows: int, k: int, dtype: torch.dtype) -> int:
    """Cores a K split of (rows, k) would use, each reading at least MIN_BYTES_PER_CORE; 0 when it does not apply."""
    if rows > MAX_ROWS:
        return 0
    return max(1, min(CORES, rows * k * dtype.itemsize // MIN_BYTES_PER_CORE))


def accumulator(dtype: torch.dtype) -> torch.dtype:
    """The partials' dtype: reductions accumulate in float32 (held float64 stays exact), integers in int64."""
    if dtype == torch.float64:
        return dtype
    return torch.float32 if dtype.is_floating_point else torch.int64


def _identity(kind: str, dtype: torch.dtype) -> float | int:
    if kind in ("zero", "one"):
        return int(kind == "one")
    if dtype.is_floating_point:
        return -math.inf if kind == "low" else math.inf
    info = torch.iinfo(dtype)
    return info.min if kind == "low" else info.max


@dataclass(frozen=True)
class _Role:
    """A core's place on the ring: whom it receives partial rows from (in order), whom it sends to, its own row."""

    receives: tuple[int, ...]
    sends: int | None
    own: int  # pair row of its partials when it combines (1: what it receives is earlier); results land in row 0


def _ring(cores: int) -> list[int]:
    """The cores holding the slices, in slice order: core 0, a chain down to it (1..h), a chain up to it through 31.

    Core 0 is between the two chains, so partials reach it in about cores / 2 hops."""
    down = cores // 2
    return list(range(down + 1)) + list(range(CORES - (cores - 1 - down), CORES))


def _role(core: int, ring: list[int]) -> _Role:
    position = ring.index(core)
    down = len(ring) // 2
    if core == 0:
        return _Role(tuple(c for c in (1, CORES - 1) if c in ring[1:]), None, 0)
    if position <= down:
        return _Role((core + 1,) if position < down else (), core - 1, 0)
    if position == down + 1:
        return _Role((), (core + 1) % CORES, 0)
    return _Role((core - 1,), (core + 1) % CORES, 1)


def _align(n: int, to: int) -> int:
    return -(-n // to) * to


def _pair(tiles: dict[str, dict[str, Any]], name: str, rows: int, dtype: torch.dtype, offset: int) -> int:
    """A (2, width) tile of partials with aliases for each row (``{name}0r``, ``{name}1r``) and the padded row 0."""
    width = _align(rows, _WIDTH)
    dt = DTYPE_NAMES[dtype]
    row_bytes = width * dtype.itemsize
    tiles[name] = {"offset": offset, "dtype": dt, "shape": [2, width]}
    tiles[f"{name}0"] = {"offset": offset, "dtype": dt, "shape": [width]}
    tiles[f"{name}0r"] = {"offset": offset, "dtype": dt, "shape": [rows]}
    tiles[f"{name}1r"] = {"offset": offset + row_bytes, "dtype": dt, "shape": [rows]}
    return offset + 2 * row_bytes


def _compute(fn: str, inputs: Sequence[str], outputs: Sequence[str], **attrs: Any) -> dict[str, Any]:
    return {"op": "compute", "fn": fn, "inputs": list(inputs), "output": list(outputs), "attrs": attrs}


@dataclass(frozen=True)
class _Layout:
    """Everything one core's instructions need besides its slice."""

    reduction: Reduction
    rows: int
    k: int
    dtype: torch.dtype
    acc: torch.dtype
    outs: tuple[tuple[str, torch.dtype], ...]
    tiles: dict[str, dict[str, Any]]  # the partials' and outputs' tiles, the same on every core
    head: int  # offset of the tile a misaligned head is sliced into (one stick)
    base: int  # offset of the chunk tiles, after everything else
    chunk: int  # elements per chunk tile, whole sticks

    @property
    def per_stick(self) -> int:
        return STICK // self.dtype.itemsize

    def combine(self, pair: str) -> list[dict[str, Any]]:
        """Combine row 1 (the later elements) into row 0 of pair `pair` ('c': chunk partials, 'p': partial rows)."""
        fn = self.reduction.combine
        if not self.reduction.indexed:
            return [_compute(fn, [f"{pair}v0r", f"{pair}v1r"], [f"{pair}v0r"])]
        return [
            _compute(fn, [f"{pair}v"], [f"{pair}v0", f"{pair}s"], dim=0),
            _compute("take_along_dim", [f"{pair}i", f"{pair}s"], [f"{pair}i0"], dim=0),
        ]

    def pieces(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """(first element, elements, lead) per DMA of [start, end): a start inside a stick loads that whole stick
        alone and drops its `lead` elements of the previous row; the rest is whole chunks from a stick boundary."""
        pieces = []
        base = start - start % self.per_stick
        if base < start:
            stop = min(end, base + self.per_stick)
            pieces.append((base, stop - base, start - base))
            start = stop
        pieces += [(s, min(self.chunk, end - s), 0) for s in range(start, end, self.chunk)]
        return pieces


def _core(core: int, lo: int, hi: int, ring: list[int], layout: _Layout) -> dict[str, Any]:
    """Core `core` reduces flat elements [lo, hi), then takes its part in the ring combine."""
    red, k, dt = layout.reduction, layout.k, DTYPE_NAMES[layout.dtype]
    role = _role(core, ring)
    kinds = ("v", "i") if red.indexed else ("v",)
    identities = {"v": _identity(red.identity, layout.acc), "i": 0}
    tiles = dict(layout.tiles)
    ins: list[dict[str, Any]] = []
    for i, row in enumerate(range(lo // k, (hi - 1) // k + 1)):
        for j, (start, n, lead) in enumerate(layout.pieces(max(lo, row * k), min(hi, (row + 1) * k))):
            source = f"x{n}"
            tiles[source] = {"offset": layout.base, "dtype": dt, "shape": [n]}
            ins.append({"op": "dma_in", "buffer": "x", "offset": start * layout.dtype.itemsize, "tile": source})
            if lead:
                source = f"h{n - lead}"
                tiles[source] = {"offset": layout.head, "dtype": dt, "shape": [n - lead]}
                ins.append(_compute("slice.Tensor", [f"x{n}"], [source], dim=0, start=lead))
            partials = [f"c{kind}{min(j, 1)}r" for kind in kinds]
            ins.append(_compute(red.chunk, [source], partials, **red.chunk_attrs))
            if red.indexed and start + lead != row * k:
                ins.append(_compute("add.Scalar", [partials[1]], [partials[1]], other=start + lead - row * k))
            if j:
                ins += layout.combine("c")
        # The row's partial, padded with the identity to a whole partial row: the first is the core's, later ones
        # combine into it.
        pad = [row, layout.rows - 1 - row]
        ins += [
            _compute("constant_pad_nd", [f"c{kind}0r"], [f"p{kind}{min(i, 1)}r"], pad=pad, value=identities[kind])
            for kind in kinds
        ]
        if i:
            ins += layout.combine("p")
    if role.own:
        ins += [_compute("copy", [f"p{kind}0r"], [f"p{kind}1r"]) for kind in kinds]
    for peer in role.receives:
        ins += [{"op": "recv", "from": peer, "tile": f"p{kind}{1 - role.own}r"} for kind in kinds]
        ins += layout.combine("p")
    if role.sends is not None:
        ins += [{"op": "send", "to": role.sends, "tile": f"p{kind}0r"} for kind in kinds]
    if core == 0:
        ins += _finish(layout)
    return {"core": core, "tiles": tiles, "instructions": ins}


def _finish(layout: _Layout) -> list[dict[str, Any]]:
    """Core 0's partial rows become the outputs: values cast (mean: divided by K, rounded once), indices as they are."""
    sources = ["pi0r"] if layout.reduction.indexed and len(layout.outs) == 1 else ["pv0r", "pi0r"]
    ins = []
    for (name, dtype), source in zip(layout.outs, sources[: len(layout.outs)], strict=True):
        tile = source
        if source == "pv0r" and layout.reduction.mean:
            ins.append(_compute("div.Scalar", [source], [name], other=layout.k))
            tile = name
        elif dtype != (torch.int64 if source == "pi0r" else layout.acc):
            ins.append(_compute("cast", [source], [name]))
            tile = name
        ins.append({"op": "dma_out", "tile": tile, "buffer": name, "offset": 0})
    return ins


def split_program(
    name: str, reduction: Reduction, dtype: torch.dtype, rows: int, k: int, outs: Sequence[tuple[str, torch.dtype]]
) -> dict[str, Any]:
    """The K-split program reducing buffer ``x`` of shape (rows, k) into the (rows,) output buffers `outs`."""
    cores = split_cores(rows, k, dtype)
    total = rows * k
    span = DEFAULT_MODEL.addressable_span_bytes
    if -(-total * dtype.itemsize // cores) > span:
        raise TooLargeError(
            f"ring: aten::{name}: {total * dtype.itemsize} bytes exceed {CORES} cores' {span}-byte spans"
        )
    acc = accumulator(dtype)
    tiles: dict[str, dict[str, Any]] = {}
    offset = _pair(tiles, "cv", 1, acc, 0)
    offset = _pair(tiles, "pv", rows, acc, offset)
    if reduction.indexed:
        offset = _pair(tiles, "ci", 1, torch.int64, offset)
        offset = _pair(tiles, "pi", rows, torch.int64, offset)
        for pair, n in (("c", 1), ("p", rows)):
            tiles[f"{pair}s"] = {"offset": offset, "dtype": "int64", "shape": [1, _align(n, _WIDTH)]}
            offset += _align(n, _WIDTH) * 8
    for out, out_dtype in outs:
        tiles[out] = {"offset": offset, "dtype": DTYPE_NAMES[out_dtype], "shape": [rows]}
        offset += _align(rows * out_dtype.itemsize, STICK)
    per_stick = STICK // dtype.itemsize
    chunk = (SCRATCHPAD - offset - STICK) // dtype.itemsize // per_stick * per_stick  # after the head's stick
    layout = _Layout(reduction, rows, k, dtype, acc, tuple(outs), tiles, offset, offset + STICK, chunk)
    ring = _ring(cores)
    bounds = [total * c // cores // per_stick * per_stick for c in range(cores)] + [total]
    buffers = {"x": {"dtype": DTYPE_NAMES[dtype], "shape": [rows, k]}}
    buffers.update({out: {"dtype": DTYPE_NAMES[out_dtype], "shape": [rows]} for out, out_dtype in outs})
    return {
        "format": "ringsim-program/1",
        "name": f"{name}/k_split",
        "buffers": buffers,
        "cores": [_core(core, bounds[i], bounds[i + 1], ring, layout) for i, core in enumerate(ring)],
    }
