"""Compiled mm/addmm on ring as Inductor template nodes, so that their pointwise consumers can join them.

An extern call is a fusion barrier: the scheduler never fuses into it, so `gelu(x @ w)` would write the product to
device memory and read it back in a second kernel. A template node is not: the scheduler asks the backend whether
each pointwise consumer of the product may join it (`RingScheduling.can_fuse_vertical`, which asks the co-optimiser,
`fusion`) and then hands the template and whatever joined it to `RingScheduling.codegen_template`. A template left
alone is emitted as the same `ring_inductor::` matmul call as before.
"""

from __future__ import annotations

from typing import Any

import torch

from ring_inductor.torchprivate import FixedLayout, TemplateBuffer, TensorBox, realize_input

#: The dtypes the device's matmuls take (both operands and any bias the same).
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


class RingMatmulBuffer(TemplateBuffer):
    """The product of one ring mm or addmm (`fn`); its inputs are `[bias,] a, b` as realized buffers or views."""

    def __init__(self, fn: str, layout: Any, inputs: list[Any]) -> None:
        super().__init__(layout, inputs, make_kernel_render=None)
        self.fn = fn

    def should_allocate(self) -> bool:
        """The call that computes it assigns it (an unfused template), or the fused kernel's caller allocates it."""
        return False

    def shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(int(s) for s in x.get_size()) for x in self.inputs)


def templatable(fn: str, args: tuple[Any, ...]) -> bool:
    """Whether a ring mm/addmm lowers to a template: static 2-D operands of one device dtype."""
    if fn not in ("mm", "addmm"):
        return False
    dtypes = {x.get_dtype() for x in args}
    sizes = [s for x in args for s in x.get_size()]
    return (
        len(dtypes) == 1
        and dtypes <= set(DTYPES)
        and all(len(x.get_size()) == 2 for x in args[-2:])
        and all(isinstance(s, int) or getattr(s, "is_Integer", False) for s in sizes)
    )


def lower(fn: str, *args: Any) -> Any:
    """The lowering of ring `fn(*args)`: a template node over the realized operands."""
    inputs = [realize_input(x) for x in args]
    a, b = inputs[-2:]
    layout = FixedLayout(a.get_device(), a.get_dtype(), [a.get_size()[0], b.get_size()[1]])
    return TensorBox.create(RingMatmulBuffer(fn, layout, inputs))
