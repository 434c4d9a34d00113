"""Checking the device against upstream OpInfo samples: the same cases on ring and on a float64 CPU reference.

Shared by the conformance tests and the OpInfo sweep benchmark, so both run exactly the same cases. Imports
``torch.testing._internal`` (slow, test-only) lazily.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ringsim.ops.numerics import bound
from ringsim.ops.registry import DEVICE, OPINFO_NEEDS, Kind, Tolerance, by_packet, opinfo_dtypes
from ringsim.torchbridge import opinfo_db

_ORDER = list(Tolerance)


@dataclass(frozen=True)
class Case:
    """One OpInfo sample for one dtype."""

    opinfo: Any
    name: str
    dtype: torch.dtype
    index: int
    sample: Any

    @property
    def id(self) -> str:
        return f"{self.name}-{str(self.dtype).removeprefix('torch.')}-{self.index}"


def opinfos() -> dict[str, Any]:
    """The op_db entries the device serves, by full name."""
    return {op.full_name: op for op in opinfo_db() if op.full_name in OPINFO_NEEDS}


def cases(names: list[str] | None = None, samples: int = 3) -> Iterator[Case]:
    """The first `samples` CPU sample inputs per served OpInfo entry and supported dtype."""
    served = opinfos()
    for name in sorted(names or served):
        op = served[name]
        for dtype in opinfo_dtypes(name):
            if dtype not in op.supported_dtypes("cpu"):
                continue
            for index, sample in enumerate(op.sample_inputs("cpu", dtype, requires_grad=False)):
                if index >= samples:
                    break
                yield Case(op, name, dtype, index, sample)


def to_device(sample: Any, device: str) -> Any:
    return sample.transform(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t)


def to_reference(sample: Any) -> Any:
    return sample.transform(
        lambda t: t.to(torch.float64) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
    )


def run(case: Case, sample: Any) -> Any:
    return case.opinfo(sample.input, *sample.args, **sample.kwargs)


def tolerance(name: str) -> Tolerance:
    """The loosest numerics class among the registry ops an OpInfo entry needs."""
    return max((by_packet()[p].tolerance for p in OPINFO_NEEDS[name]), key=_ORDER.index)


def tensors(result: Any) -> list[torch.Tensor]:
    """The tensors in an op's result, flattened, so callers compare or move every output alike."""
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [t for item in result for t in tensors(item)]
    return []


def reduction_length(case: Case, output: torch.Tensor) -> int:
    """K in the documented bound: elements combined into one output element."""
    source = case.sample.input
    first = source[0] if isinstance(source, (list, tuple)) else source
    if any(by_packet()[p].kind is Kind.MATMUL for p in OPINFO_NEEDS[case.name]):
        return first.shape[-1] if first.dim() else 1
    return max(1, first.numel() // max(1, output.numel()))


def check(case: Case) -> str | None:
    """Run the case on the device; None when every output is within the documented bound, else why not."""
    actual = tensors(run(case, to_device(case.sample, DEVICE)))
    reference = tensors(run(case, to_reference(case.sample)))
    if len(actual) != len(reference):
        return f"{len(actual)} outputs, reference has {len(reference)}"
    dtypes = expected_dtypes(case)
    if len(dtypes) != len(actual):
        return f"{len(actual)} outputs, torch gives {len(dtypes)}"
    for i, (a, r, dtype) in enumerate(zip(actual, reference, dtypes, strict=True)):
        if a.device.type != DEVICE:
            return f"output {i} is on {a.device}, not on the device"
        if tuple(a.shape) != tuple(r.shape):
            return f"output {i} has shape {tuple(a.shape)}, reference {tuple(r.shape)}"
        if a.dtype != dtype:
            return f"output {i} has dtype {a.dtype}, torch gives {dtype} for these inputs"
        if not a.is_floating_point():
            if not torch.equal(a.cpu(), r):
                return f"output {i} differs from the reference"
            continue
        scale = None
        if tolerance(case.name) is Tolerance.MATMUL:
            scale = _input_scale(case)
        elif tolerance(case.name) is Tolerance.FUSED:
            scale = _term_scale(case, r)
        limit = bound(tolerance(case.name), a.dtype, reduction_length(case, a))
        bad = limit.violations(a.cpu(), r, scale)
        if bad:
            diff = (a.cpu().double() - r).abs().nan_to_num(nan=math.inf).max().item()
            return f"output {i}: {bad} of {a.numel()} elements outside {limit} (max abs diff {diff:.3g})"
    return None


def expected_dtypes(case: Case) -> list[torch.dtype]:
    """The output dtypes torch gives for the sample's own dtypes: the float64 reference cannot tell them.

    From the meta kernel (no compute; torch's device-independent rule, which the device's kernels follow), else CPU.
    They differ for native_layer_norm on float16/bfloat16, whose mean and rstd are float32 on meta (and CUDA) but
    keep the input dtype on CPU.
    """
    try:
        return [t.dtype for t in tensors(run(case, to_device(case.sample, "meta")))]
    except (NotImplementedError, RuntimeError, TypeError, ValueError):
        return [t.dtype for t in tensors(run(case, case.sample))]


def _term_scale(case: Case, reference: torch.Tensor) -> float:
    """For fused bounds: the magnitude of the term added to self (the op evaluated with self = 0) or the result."""
    sample = to_reference(case.sample)
    term = tensors(case.opinfo(torch.zeros_like(sample.input), *sample.args, **sample.kwargs))[0]
    finite = torch.cat([term.abs().reshape(-1), reference.abs().reshape(-1)])
    finite = finite[torch.isfinite(finite)]
    return max(1.0, float(finite.max())) if finite.numel() else 1.0


def _input_scale(case: Case) -> float:
    """For matmul bounds: the product of the operands' largest magnitudes (at least 1)."""
    mags = [t.abs().max().item() for t in tensors([case.sample.input, *case.sample.args]) if t.numel()]
    return max(1.0, math.prod(mags[-2:]) if len(mags) >= 2 else 1.0)
