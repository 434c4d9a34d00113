"""Ops whose Inductor lowering indexes indirectly (gather, index, embedding, scatter): on ring they run eagerly.

The ring codegen handles affine indexing only; these ops become extern calls of the device's own eager kernels
(one-core gather/scatter programs) for ring inputs, and keep Inductor's lowering on every other device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from ring_inductor.torchprivate import eager_fallback_lowering, inductor_lowerings

aten = torch.ops.aten
DEVICE = "ring"

#: Lowered by Inductor to indirect loads or stores, which ring kernels do not express.
INDIRECT_OPS = (
    aten.gather.default,
    aten.index.Tensor,
    aten.index_select.default,
    aten.embedding.default,
    aten.scatter.src,
    aten.scatter.value,
    aten.scatter_add.default,
    aten.index_put.default,
)


def _on_ring(args: Any, kwargs: Any) -> bool:
    for node in tree_leaves((args, kwargs)):
        device = node.get_device() if hasattr(node, "get_device") else None
        if isinstance(device, torch.device) and device.type == DEVICE:
            return True
    return False


def _for_ring(op: Any, current: Callable[..., Any]) -> Callable[..., Any]:
    eager = eager_fallback_lowering(op)

    def lowering(*args: Any, **kwargs: Any) -> Any:
        return (eager if _on_ring(args, kwargs) else current)(*args, **kwargs)

    lowering.ring_inductor = True  # type: ignore[attr-defined]
    return lowering


def install() -> None:
    """Route the indirect-indexing ops to eager ring kernels for ring inputs (once)."""
    for op in INDIRECT_OPS:
        current = inductor_lowerings.get(op)
        if current is not None and not getattr(current, "ring_inductor", False):
            inductor_lowerings[op] = _for_ring(op, current)
