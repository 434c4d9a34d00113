"""Which sticks a matmul's right operand is copied into when it must be copied: the layout pass on Inductor's graph.

A batched product of 4-D tensors (`q @ k.transpose(-2, -1)` with q and k [batch, heads, tokens, dim]) reaches
Inductor as `bmm(a, reshape(clone(view), [b, k, n]))`: the clone makes the view contiguous in the view's own order.
For attention's keys that order is the transpose of how they are stored, so the clone is a restickify into N-sticks
and the bmm then reads B along N. Copied the other way, into the keys' own order (K-sticks), the clone only gathers
whole runs and the bmm reads B along K as stored (`linear`). Neither is always cheaper: this pass prices both with
the simulator (the relayout program that makes the copy, plus the matmul program that reads it) and rewrites the
graph to the cheaper one. `<matmul node>.decisions.json` in the dump records both prices and the choice.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch
from ringsim.engine import parse_program, plan

from ring_inductor import config, dump, matmul, relayout
from ring_inductor.errors import UnsupportedError
from ring_inductor.torchprivate import CustomGraphModulePass, V, aten_unsafe_view

aten = torch.ops.aten
DEVICE = "ring"
_MATMULS = {aten.bmm.default: "bmm", aten.mm.default: "mm"}
_VIEWS = (aten.reshape.default, aten.view.default, aten_unsafe_view.default)


def _matmul_cycles(fn: str, shapes: tuple[tuple[int, ...], ...], dtype: torch.dtype, along_k: bool) -> float | None:
    """The simulated cycles of the whole-B matmul program; None when B overflows a core (the planner's case)."""
    try:
        return plan(parse_program(matmul.matmul_program(fn, shapes, dtype, along_k))).report.total_cycles
    except UnsupportedError:
        return None


def price(fn: str, shapes: tuple[tuple[int, ...], ...], source: torch.Tensor) -> dict[str, dict[str, float] | None]:
    """Both ways to copy `source`, the strided [.., k, n] view the matmul of these operand shapes reads as its right
    operand: in its own order, read along N, or in its transpose's order, read along K. None: not priceable."""
    options: dict[str, dict[str, float] | None] = {}
    for sticks, copied in (("along N", source), ("along K", source.transpose(-2, -1))):
        relay = None if copied.is_contiguous() else relayout.cycles(copied)
        product = _matmul_cycles(fn, shapes, source.dtype, sticks == "along K")
        options[sticks] = (
            None
            if relay is None or product is None
            else {"relayout": relay, "matmul": product, "total": relay + product}
        )
    return options


def _value(node: Any) -> Any:
    return node.meta.get("val") if hasattr(node, "meta") else None


def _copied_operand(node: Any) -> tuple[Any, Any, Any] | None:
    """(reshape, clone, source) when the matmul `node` reads its right operand as reshape(clone(source)), each
    used only there, on the ring, the reshape merging batch dims; else None."""
    reshape = node.args[1]
    if getattr(reshape, "target", None) not in _VIEWS or len(reshape.users) != 1:
        return None
    clone = reshape.args[0]
    if getattr(clone, "target", None) is not aten.clone.default or len(clone.users) != 1:
        return None
    source = clone.args[0]
    value = _value(source)
    if not isinstance(value, torch.Tensor) or value.device.type != DEVICE or value.dim() < 2:
        return None
    if tuple(value.shape[-2:]) != tuple(_value(reshape).shape[-2:]):
        return None  # the reshape merges the batch dims only: [.., k, n] stays the matmul's [k, n]
    return reshape, clone, source


def _call(graph: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
    """A new node computing `target`, with its fake value (what Inductor's lowering reads)."""
    node = graph.call_function(target, args, kwargs)
    values = [_value(a) if isinstance(a, torch.fx.Node) else a for a in args]
    with V.fake_mode:
        node.meta["val"] = target(*values, **kwargs)
    return node


def _read_along_k(graph: Any, node: Any, reshape: Any, clone: Any, source: Any) -> None:
    """Rewrites `matmul(a, reshape(clone(source)))` to `matmul(a, T(reshape(clone(T(source)))))`, T swapping the
    last two dims: the copy is made in the keys' own order and the matmul reads it along K."""
    dims = _value(source).dim()
    swap = [*range(dims - 2), dims - 1, dims - 2]
    *outer, k, n = _value(reshape).shape
    with graph.inserting_before(clone):
        transposed = _call(graph, aten.permute.default, source, swap)
        copied = _call(graph, aten.clone.default, transposed, memory_format=torch.contiguous_format)
        rows = _call(graph, aten.reshape.default, copied, [*outer, n, k])
        operand = _call(graph, aten.permute.default, rows, [*range(len(outer)), len(outer) + 1, len(outer)])
    node.replace_input_with(reshape, operand)
    graph.erase_node(reshape)
    graph.erase_node(clone)


def choose(graph: Any, node: Any) -> dict[str, Any] | None:
    """Prices both copies of `node`'s copied right operand, rewrites the graph to the cheaper and dumps the
    decision, which it returns (None: the operand is not copied, or a price is missing)."""
    found = _copied_operand(node)
    if found is None:
        return None
    reshape, clone, source = found
    fn, view = _MATMULS[node.target], _value(source)
    shapes = (tuple(_value(node.args[0]).shape), tuple(_value(reshape).shape))
    options = price(fn, shapes, view)
    if any(option is None for option in options.values()):
        return None
    chosen = min(options, key=lambda sticks: options[sticks]["total"])
    decision = {"matmul": node.name, "fn": fn, "shapes": [list(s) for s in shapes],
                "b_view": {"sizes": list(view.shape), "strides": list(view.stride())},
                "options": options, "chosen": chosen}  # fmt: skip
    if chosen == "along K":
        _read_along_k(graph, node, reshape, clone, source)
    dump.write(f"ring_operand_sticks_{fn}_{'_'.join('x'.join(map(str, s)) for s in shapes)}", None, decision)
    return decision


class OperandSticksPass(CustomGraphModulePass):
    """Inductor's per-device graph pass (`register_backend_for_device(device_custom_pass=...)`), run after its
    post-grad passes on every graph that holds ring tensors."""

    def __call__(self, gm: torch.fx.GraphModule) -> None:
        if not config.layout_pass:
            return
        for node in list(gm.graph.nodes):
            if node.op == "call_function" and node.target in _MATMULS:
                choose(gm.graph, node)

    def uuid(self) -> str:
        """This module's source and the layout switch: what decides the rewritten graph."""
        return hashlib.sha256(Path(__file__).read_bytes() + bytes([config.layout_pass])).hexdigest()
