"""Compile a function for ring, run it, and see which kernels the simulator ran: what correctness checks need."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import ringsim
import torch
import torch.nn.functional as F
from torch import nn

from ring_inductor.torchprivate import no_compile_caches


def compiled_run(fn: Callable[..., Any], *inputs: torch.Tensor) -> tuple[Any, dict[str, int]]:
    """`fn` compiled (static shapes, no on-disk caches) and run on `inputs` moved to ring; its kernels by name."""
    torch.compiler.reset()  # a fresh compile even when `fn` shares a code object with an earlier one
    with no_compile_caches():
        compiled = torch.compile(fn, dynamic=False)
        ringsim.reset_stats()
        out = compiled(*(x.to("ring") for x in inputs))
    return out, {name: entry["kernels"] for name, entry in ringsim.stats()["by_kernel"].items()}


def compiled_kernels(kernels: dict[str, int]) -> dict[str, int]:
    """The kernels ring_inductor generated (eager fallbacks and copies carry the aten op's name)."""
    return {name: n for name, n in kernels.items() if name.startswith("ring_")}


def float64_reference(fn: Callable[..., Any], *inputs: torch.Tensor) -> Any:
    """`fn` on CPU in float64 over the same (already rounded) inputs."""
    return fn(*(x.double() for x in inputs))


class TransformerBlock(nn.Module):
    """Pre-norm attention + GELU MLP, the shape of a transformer layer: what the tests and the compiled benchmark
    compile as one model."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(attn)
        return x + self.down(F.gelu(self.up(self.norm2(x))))


def block_case(
    dim: int, heads: int, batch: int, tokens: int
) -> tuple[Callable[..., Any], tuple[torch.Tensor, ...], Callable[..., Any]]:
    """An fp16 `TransformerBlock` on ring, its input on the host, and its float64 twin on CPU: what the benchmarks
    compile, run and compare."""
    block = TransformerBlock(dim, heads).half().eval()
    x = torch.randn(batch, tokens, dim, dtype=torch.float16)
    reference = copy.deepcopy(block).double()
    on_ring = block.to("ring")
    return (lambda x: on_ring(x)), (x,), (lambda x: reference(x.double()))
