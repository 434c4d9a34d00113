"""Emission of two-op kernels whose ops divide the rows differently, and of the hand-over between them.

`elementwise_pass` is a consumer that runs as its own pass over a buffer (each core a contiguous share). The
hand-over kernel runs a row-wise producer on equal row blocks per core and a last-dim reduction on blocks of whole
output sticks (a fp16 [rows, 1] result is written 64 rows at a time), placed on the core holding the block's first
rows: the rows a block lacks are on the next core. They travel either through device memory (the producer stores,
a barrier, the consumer loads) or over the ring (the next core sends them: a one-hop relayout).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from .emit import BARRIER, Emitted, Tiles, compute, dma_in, dma_out, document, flat, recv, send
from .graph import DTYPE_BYTES, Graph, OpKind
from .tiling import TilingError


def elementwise_pass(
    source: str, target: str, numel: int, dtype: str, fns: Sequence[str], cores: int, chunk_bytes: int = 256 * 1024
) -> list[dict[str, Any]]:
    """Per core: its share of `source`, chunk by chunk (double-buffered), `fns` applied in place, into `target`."""
    itemsize = DTYPE_BYTES[dtype]
    share = numel * itemsize // cores
    chunk = min(chunk_bytes, share)
    if share % chunk or chunk % 128:
        raise TilingError(f"a share of {share} bytes does not cut into chunks of whole sticks")
    programs = []
    for core in range(cores):
        tiles = Tiles()
        slots = [tiles.add(f"pass{s}", dtype, [chunk // itemsize]) for s in range(2)]
        code: list[dict[str, Any]] = []
        count = share // chunk
        code.append(dma_in(source, core * share, slots[0]))
        for index in range(count):
            slot = slots[index % 2]
            if index + 1 < count:
                code.append(dma_in(source, core * share + (index + 1) * chunk, slots[(index + 1) % 2]))
            code += [compute(fn, [slot], slot) for fn in fns]
            code.append(dma_out(slot, target, core * share + index * chunk))
        programs.append({"core": core, "tiles": tiles.specs, "instructions": code})
    return programs


def then(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One kernel doing `first`, a barrier (its stores become visible), then `second`; tiles of both phases are
    kept apart by name (the second phase's tiles may reuse the first's bytes)."""
    by_core = {program["core"]: program for program in second}
    merged = []
    for program in first:
        other = by_core[program["core"]]
        clash = set(program["tiles"]) & set(other["tiles"])
        if clash:
            raise TilingError(f"core {program['core']}: both phases name tile {sorted(clash)[0]!r}")
        merged.append(
            {
                "core": program["core"],
                "tiles": {**program["tiles"], **other["tiles"]},
                "instructions": [*program["instructions"], BARRIER, *other["instructions"]],
            }
        )
    return merged


def emit_handover(
    graph: Graph, producer_rows: int, consumer_rows: int, transition: Literal["spill", "relayout"], cores: int = 32
) -> Emitted:
    """`graph` is x -> pointwise -> t -> last-dim reduction -> s; the producer gets `producer_rows` rows per core,
    the reduction blocks of `consumer_rows` rows, each on the core holding its first row."""
    first, second = graph.ops
    if first.kind is not OpKind.POINTWISE or second.kind is not OpKind.REDUCTION or second.inputs != (first.output,):
        raise TilingError("a hand-over kernel is a pointwise op feeding a last-dim reduction")
    x, t, s = graph.tensors[first.inputs[0]], graph.tensors[first.output], graph.tensors[second.output]
    rows, cols = x.shape
    row = cols * DTYPE_BYTES[x.dtype]
    if rows != producer_rows * cores or rows % consumer_rows or consumer_rows >= 2 * producer_rows:
        raise TilingError("each reduction block must span at most two producer cores")
    blocks = {core: [] for core in range(cores)}
    for block in range(rows // consumer_rows):
        blocks[block * consumer_rows // producer_rows].append(block)
    programs = []
    for core in range(cores):
        tiles = Tiles()
        tiles.add("x", x.dtype, [producer_rows, cols])
        produced = tiles.add("t", t.dtype, [producer_rows, cols])
        code = [dma_in(x.name, core * producer_rows * row, "x"), compute(first.fn, ["x"], produced)]
        if transition == "spill":
            code.append(dma_out(produced, t.name, core * producer_rows * row))
        code.append(BARRIER)
        # rows of this core that the previous core's last block needs: sent over the ring in a relayout
        low = core * producer_rows
        needing = [b for b in blocks.get(core - 1, []) if (b + 1) * consumer_rows > low]
        if transition == "relayout" and needing:
            lent = (needing[-1] + 1) * consumer_rows - low
            code.append(send(core - 1, tiles.add("lent", t.dtype, [lent, cols], tiles.specs[produced]["offset"])))
        for slot, block in enumerate(blocks[core]):
            start = block * consumer_rows
            gathered = tiles.add(f"blk{slot}", t.dtype, [consumer_rows, cols])
            result = tiles.add(f"s{slot}", s.dtype, [consumer_rows, 1])
            if transition == "spill":
                code.append(dma_in(t.name, start * row, gathered))
            else:
                base = tiles.specs[gathered]["offset"]
                local = min(consumer_rows, low + producer_rows - start)
                view = tiles.add(
                    f"mine{slot}", t.dtype, [local, cols], tiles.specs[produced]["offset"] + (start - low) * row
                )
                head = tiles.add(f"head{slot}", t.dtype, [local, cols], base)
                code.append(compute("copy", [view], head))
                if local < consumer_rows:
                    tail = tiles.add(f"tail{slot}", t.dtype, [consumer_rows - local, cols], base + local * row)
                    code.append(recv(core + 1, tail))
            code.append(compute(second.fn, [gathered], result, dim=[-1], keepdim=True))
            code.append(dma_out(result, s.name, start * DTYPE_BYTES[s.dtype]))
        programs.append({"core": core, "tiles": tiles.specs, "instructions": code})
    buffers = {
        name: {"dtype": graph.tensors[name].dtype, "shape": list(graph.tensors[name].shape)}
        for name in (x.name, s.name)
    }
    if transition == "spill":
        buffers[t.name] = {"dtype": t.dtype, "shape": list(t.shape)}
    emitted = Emitted(document(f"handover_{transition}", buffers, programs))
    emitted.layouts = {x.name: [(x.name, flat)]}
    emitted.readers = {s.name: lambda bound: bound[s.name]}
    return emitted
