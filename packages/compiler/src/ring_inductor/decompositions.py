"""Decompositions of composite ops into the device's primitives, applied to ring tensors only.

Each follows the device numerics rule at graph level: float16/bfloat16 inputs are widened to float32 once, the
whole composite runs in float32 (so its fused kernel keeps float32 tiles) and the result is rounded once. They join
Inductor's decomposition table behind a device check: on any other device the entry they replace still applies.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ring_inductor.torchprivate import (
    aten_log_softmax,
    aten_softmax,
    inductor_decompositions,
    register_composite_kernel,
    tree_leaves,
)

aten = torch.ops.aten
DEVICE = "ring"
_NARROW = (torch.float16, torch.bfloat16)


def _wide(x: torch.Tensor) -> torch.Tensor:
    return x.float() if x.dtype in _NARROW else x


def softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    xf = _wide(x)
    e = torch.exp(xf - torch.amax(xf, dim, keepdim=True))
    out = e / torch.sum(e, dim, keepdim=True)
    return out if half_to_float else out.to(x.dtype)


def log_softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    xf = _wide(x)
    shifted = xf - torch.amax(xf, dim, keepdim=True)
    out = shifted - torch.log(torch.sum(torch.exp(shifted), dim, keepdim=True))
    return out if half_to_float else out.to(x.dtype)


def native_layer_norm(
    x: torch.Tensor,
    normalized_shape: Sequence[int],
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dims = list(range(x.dim() - len(normalized_shape), x.dim()))
    xf = _wide(x)
    mean = torch.mean(xf, dims, keepdim=True)
    centered = xf - mean
    rstd = torch.rsqrt(torch.mean(centered * centered, dims, keepdim=True) + eps)
    out = centered * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out.to(x.dtype), mean, rstd


def gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    xf = _wide(x)
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (xf + 0.044715 * xf * xf * xf)
        return (0.5 * xf * (1 + torch.tanh(inner))).to(x.dtype)
    return (0.5 * xf * (1 + torch.erf(xf * math.sqrt(0.5)))).to(x.dtype)


def silu(x: torch.Tensor) -> torch.Tensor:
    xf = _wide(x)
    return (xf * torch.sigmoid(xf)).to(x.dtype)


def rms_norm(
    x: torch.Tensor, normalized_shape: Sequence[int], weight: torch.Tensor | None = None, eps: float | None = None
) -> torch.Tensor:
    dims = list(range(x.dim() - len(normalized_shape), x.dim()))
    xf = _wide(x)
    eps = torch.finfo(xf.dtype).eps if eps is None else eps  # aten's default: the compute dtype's epsilon
    out = xf * torch.rsqrt(torch.mean(xf * xf, dims, keepdim=True) + eps)
    if weight is not None:
        out = out * weight
    return out.to(x.dtype)


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """The math path: softmax(q k^T * scale + mask) v; the matmuls accumulate in float32 on the device."""
    if dropout_p != 0.0:  # random dropout: torch's own path
        return aten.scaled_dot_product_attention.default.decompose(q, k, v, attn_mask, dropout_p, is_causal, scale)
    if enable_gqa and q.size(-3) != k.size(-3):
        repeat = q.size(-3) // k.size(-3)
        k, v = k.repeat_interleave(repeat, -3), v.repeat_interleave(repeat, -3)
    scale = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = _wide(torch.matmul(q, k.transpose(-2, -1))) * scale
    if is_causal:
        keep = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        is_keep = attn_mask.dtype == torch.bool
        scores = scores.masked_fill(~attn_mask, float("-inf")) if is_keep else scores + attn_mask
    probs = softmax(scores, -1, half_to_float=True)
    return torch.matmul(probs.to(q.dtype), v)


#: The ring decompositions, by the aten overload they replace.
RING_DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {
    aten_softmax.default: softmax,
    aten_log_softmax.default: log_softmax,
    aten.native_layer_norm.default: native_layer_norm,
    aten.gelu.default: gelu,
    aten.silu.default: silu,
}
#: Composite (CompositeImplicitAutograd) ops: they decompose while tracing, before the table is consulted.
RING_COMPOSITES: dict[Any, Callable[..., Any]] = {
    aten.rms_norm.default: rms_norm,
    aten.scaled_dot_product_attention.default: scaled_dot_product_attention,
}


def on_ring(args: Any, kwargs: Any) -> bool:
    """Whether a call's tensors live on the ring device (fake tensors carry their device)."""
    return any(isinstance(t, torch.Tensor) and t.device.type == DEVICE for t in tree_leaves((args, kwargs)))


def _for_ring(ring: Callable[..., Any], other: Callable[..., Any] | None) -> Callable[..., Any]:
    @functools.wraps(ring)
    def decomposition(*args: Any, **kwargs: Any) -> Any:
        if on_ring(args, kwargs):
            return ring(*args, **kwargs)
        return other(*args, **kwargs) if other is not None else NotImplemented

    decomposition.ring_inductor = True  # type: ignore[attr-defined]
    return decomposition


def install() -> None:
    """Put the ring decompositions in front of Inductor's (once; other devices keep what they had)."""
    for op, ring in RING_DECOMPOSITIONS.items():
        current = inductor_decompositions.get(op)
        if not getattr(current, "ring_inductor", False):
            inductor_decompositions[op] = _for_ring(ring, current)
    for op, ring in RING_COMPOSITES.items():
        register_composite_kernel(op, _for_ring(ring, op.decompose))
