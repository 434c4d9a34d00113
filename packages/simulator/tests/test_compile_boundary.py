"""The device's Python kernels are its runtime, not user code: torch.compile must never trace into them."""

from __future__ import annotations

import torch


def test_eager_ring_ops_inside_a_compiled_region_are_not_traced() -> None:
    """repr() graph-breaks, so its ring ops (isfinite, ne, abs ...) run eagerly while dynamo's frame hook is active;
    without the kernels marked, dynamo converts each kernel's frames into graphs of their own (60 here)."""
    graphs: list[torch.fx.GraphModule] = []

    def backend(gm: torch.fx.GraphModule, _inputs: list[torch.Tensor]):
        graphs.append(gm)
        return gm.forward

    torch.compiler.reset()
    x = torch.randn(50).to("ring")
    text = torch.compile(lambda t: repr(t * 2), backend=backend)(x)
    assert text.startswith("tensor(")
    assert len(graphs) == 1, [g.code for g in graphs]
