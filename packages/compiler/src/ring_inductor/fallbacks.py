"""Ring lowerings that replace Inductor's for ring inputs only: matmuls and indirect-indexing ops become extern calls.

mm and addmm of 2-D operands become template nodes (`template`), which fuse their pointwise consumers; bmm (and
any other matmul) becomes the `ring_inductor::` matmul ops (programs built by `matmul`). The ring codegen handles affine
indexing only, so gather, index, embedding and scatter call the device's own eager kernels (one-core gather/scatter
programs). Every other device keeps Inductor's lowering.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ring_inductor import matmul, template  # noqa: F401 - matmul defines the ring_inductor:: matmul ops
from ring_inductor.torchprivate import eager_fallback_lowering, inductor_lowerings, tree_leaves

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


#: aten matmuls and the ring op each becomes (addmm only with its default beta and alpha).
MATMULS = {
    aten.mm.default: torch.ops.ring_inductor.mm.default,
    aten.bmm.default: torch.ops.ring_inductor.bmm.default,
    aten.addmm.default: torch.ops.ring_inductor.addmm.default,
}


def _for_ring(op: Any, current: Callable[..., Any]) -> Callable[..., Any]:
    eager = eager_fallback_lowering(MATMULS.get(op, op))

    def lowering(*args: Any, **kwargs: Any) -> Any:
        scaled = op is aten.addmm.default and (kwargs.get("beta", 1) != 1 or kwargs.get("alpha", 1) != 1)
        if not _on_ring(args, kwargs) or scaled:
            return current(*args, **kwargs)
        fn = op.__name__.split(".")[0]
        if op in MATMULS and template.templatable(fn, args):
            return template.lower(fn, *args)
        return eager(*args, **kwargs)

    lowering.ring_inductor = True  # type: ignore[attr-defined]
    return lowering


def install() -> None:
    """Route matmuls to the ring matmul programs and indirect-indexing ops to eager ring kernels (once)."""
    for op in (*MATMULS, *INDIRECT_OPS):
        current = inductor_lowerings.get(op)
        if current is not None and not getattr(current, "ring_inductor", False):
            inductor_lowerings[op] = _for_ring(op, current)
