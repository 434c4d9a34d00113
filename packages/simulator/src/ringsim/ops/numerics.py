"""Device numerics: how Ring-32 kernels compute, and the error bound each op class is held to.

The rule. Tensors are stored in float16/bfloat16/float32. Every compute instruction widens its float16/bfloat16
tiles to float32, computes in float32 (reductions and matmul accumulate in float32), and rounds once, to the
output dtype, when it writes the output tile. Intermediates a kernel keeps in float32 tiles are not rounded.

Hence results differ from CPU eager (which rounds float16 matmul/reductions differently), and upstream tests with
CPU-tight tolerances may legitimately fail. What the device guarantees, measured against a float64 reference
computed on the same (already rounded) inputs, is

    |device - reference| <= atol * scale + rtol * |reference|

with u the unit roundoff of the output dtype (float16 2^-11, bfloat16 2^-8, float32 2^-24), u32 = 2^-24, K the
reduction length (elements combined per output; for matmul the inner dimension) and `scale` 1 for the pointwise
classes, max(1, max |reference|) for the accumulating ones (cancellation makes a purely relative bound meaningless
there), max(1, max|reference|, max|term|) for the fused classes and max(1, max|A| * max|B|) for matmul:

| class | rtol | atol | why |
| --- | --- | --- | --- |
| exact | 0 | 0 | moves, selects or compares values without arithmetic |
| rounded | 2u | 2u * 2^-10 | one correctly rounded fp32 operation, then one rounding (atol: the subnormal range) |
| transcendental | 2u + 16 u32 | 2u * 2^-6 + 16 u32 | fp32 library functions are a few fp32 ulps off |
| fused | 2u + 8 u32 | 8 u32 | self + term (addcmul, addcdiv, lerp): fp32 error relative to the larger of the two |
| reduction | 2u + K u32 | 2u + K u32 | fp32 accumulation error grows with K |
| matmul | 2u + K u32 | (2u + K u32) K | each output sums K products of magnitude up to `scale` |
| normalization | 4u + K u32 | 4u + K u32 | a reduction, a transcendental and a division per row |
| statistical | 4u + 2K u32 | 4u + 2K u32 | two passes (mean, then squared deviations) |
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ringsim.ops.registry import Tolerance

U32 = 2.0**-24
UNIT_ROUNDOFF: dict[torch.dtype, float] = {
    torch.float16: 2.0**-11,
    torch.bfloat16: 2.0**-8,
    torch.float32: U32,
}


@dataclass(frozen=True)
class Bound:
    """``|device - reference| <= atol * scale + rtol * |reference|``."""

    rtol: float
    atol: float
    scaled: bool = True  # atol multiplies the magnitude scale (accumulating classes) or stands alone

    def violations(self, actual: torch.Tensor, reference: torch.Tensor, scale: float | None = None) -> int:
        """How many elements break the bound (NaN/inf must match the reference exactly)."""
        actual = actual.detach().to("cpu", torch.float64)
        reference = reference.detach().to("cpu", torch.float64)
        if not self.scaled:
            scale = 1.0
        elif scale is None:
            finite = reference[torch.isfinite(reference)]
            scale = max(1.0, float(finite.abs().max())) if finite.numel() else 1.0
        both_nan = actual.isnan() & reference.isnan()
        same_inf = torch.isinf(reference) & (actual == reference)
        close = (actual - reference).abs() <= self.atol * scale + self.rtol * reference.abs()
        return int((~(close | both_nan | same_inf)).sum())


def bound(tolerance: Tolerance, dtype: torch.dtype, k: int = 1) -> Bound:
    """The documented bound for an op of this class writing ``dtype`` after a reduction of length ``k``."""
    if tolerance is Tolerance.EXACT or dtype not in UNIT_ROUNDOFF:
        return Bound(0.0, 0.0)
    u = UNIT_ROUNDOFF[dtype]
    k = max(1, k)
    match tolerance:
        case Tolerance.ROUNDED:
            return Bound(2 * u, 2 * u * 2.0**-10, scaled=False)
        case Tolerance.TRANSCENDENTAL:
            return Bound(2 * u + 16 * U32, 2 * u * 2.0**-6 + 16 * U32, scaled=False)
        case Tolerance.FUSED:
            return Bound(2 * u + 8 * U32, 8 * U32)
        case Tolerance.REDUCTION:
            return Bound(2 * u + k * U32, 2 * u + k * U32)
        case Tolerance.MATMUL:
            return Bound(2 * u + k * U32, (2 * u + k * U32) * k)
        case Tolerance.NORMALIZATION:
            return Bound(4 * u + k * U32, 4 * u + k * U32)
        case Tolerance.STATISTICAL:
            return Bound(4 * u + 2 * k * U32, 4 * u + 2 * k * U32)
    raise AssertionError(tolerance)
