"""A device-generic OpInfo test as upstream writes one, instantiated on `ring` by torch's own machinery.

`instantiate_device_type_tests` makes one class per device; PrivateUse1TestBase.setUpClass() is called first so the
class name carries the backend's name (`...RING`) and method names end in `_ring_<dtype>`. The test does what
test_ops.py does: samples are made on the device under test (`op.sample_inputs(device, dtype)`, i.e. make_tensor on
ring), the op runs there, and `self.assertEqual` compares it with the op on CPU copies of the same samples, as
test_compare_cpu does. Exact ops must match exactly; ops that round differently from CPU get the device's documented
bound (``ringsim.ops.numerics``) as atol/rtol, widened by CPU's own rounding error in the dtype.
"""

from __future__ import annotations

from typing import Any

import torch
from ringsim.ops import conformance
from ringsim.ops.numerics import bound
from ringsim.ops.registry import FLOATS, OPINFO_NEEDS, Tolerance
from torch.testing._internal.common_device_type import (
    PrivateUse1TestBase,
    instantiate_device_type_tests,
    ops,
)
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase

PrivateUse1TestBase.setUpClass()

SUBSET = (
    "add",
    "mul",
    "exp",
    "sum",
    "softmax",
    "nn.functional.gelu",
    "mm",
    "where",
    "sort",
    "cumsum",
    "flip",
    "index_put",
    "scatter",
)
SUBSET_OPS = [op for op in op_db if op.full_name in SUBSET]


def on_cpu(sample: Any) -> Any:
    """The same sample with every tensor copied to CPU."""
    return sample.transform(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t)


def magnitude(t: torch.Tensor) -> float:
    """The largest finite |value| of `t` (0 for none)."""
    finite = t[torch.isfinite(t)].abs()
    return float(finite.max()) if finite.numel() else 0.0


def tolerances(case: conformance.Case, expected: torch.Tensor, reference: torch.Tensor) -> dict[str, float]:
    """assertEqual's atol/rtol for one output of the device against CPU in the same dtype.

    Exact ops must match exactly. Otherwise the device is held to its documented bound against the float64
    `reference` (atol scaled by the magnitude its error grows with: the result's for accumulating classes,
    max|A| * max|B| for matmul), and since CPU rounds in the same dtype, CPU's own measured distance from the reference
    is added: |device - cpu| <= |device - reference| + |cpu - reference|."""
    klass = conformance.tolerance(case.name)
    if klass is Tolerance.EXACT or not expected.is_floating_point():
        return {"rtol": 0.0, "atol": 0.0}
    limit = bound(klass, expected.dtype, conformance.reduction_length(case, expected))
    scale = 1.0
    if limit.scaled:
        operands = [t for t in (case.sample.input, *case.sample.args) if isinstance(t, torch.Tensor)][:2]
        matmul = klass is Tolerance.MATMUL and len(operands) == 2
        scale = max(1.0, magnitude(operands[0]) * magnitude(operands[1]) if matmul else magnitude(reference))
    both = torch.isfinite(expected) & torch.isfinite(reference)
    cpu_error = magnitude((expected.double() - reference)[both])
    return {"rtol": limit.rtol, "atol": limit.atol * scale + (1 + limit.rtol) * cpu_error}


class TestRingOps(TestCase):
    @ops(SUBSET_OPS, allowed_dtypes=FLOATS)
    def test_matches_reference(self, device: str, dtype: torch.dtype, op) -> None:
        assert torch.device(device).type == "ring"
        for index, sample in enumerate(op.sample_inputs(device, dtype, requires_grad=False)):
            assert sample.input.device == torch.device(device)  # made on the device
            cpu_sample = on_cpu(sample)
            case = conformance.Case(op, op.full_name, dtype, index, cpu_sample)
            actual = conformance.tensors(op(sample.input, *sample.args, **sample.kwargs))
            expected = conformance.tensors(conformance.run(case, cpu_sample))
            references = conformance.tensors(conformance.run(case, conformance.to_reference(cpu_sample)))
            assert len(actual) == len(expected)
            for a, e, r in zip(actual, expected, references, strict=True):
                assert a.device.type == "ring"
                # torch's TestCase.assertEqual, as upstream compares tensors (not unittest's)
                self.assertEqual(a, e, msg=f"sample {index}: {sample.summary()}", **tolerances(case, e, r))  # noqa: PT009


instantiate_device_type_tests(TestRingOps, globals(), only_for=("ring",))


def test_generated_class_and_method_names() -> None:
    cls = globals()["TestRingOpsRING"]
    names = {name for name in dir(cls) if name.startswith("test_")}
    for dtype in ("float16", "bfloat16", "float32"):
        assert f"test_matches_reference_add_ring_{dtype}" in names
    assert "test_matches_reference_add_ring_float64" not in names
    assert "TestRingOpsPRIVATEUSE1" not in globals()
    assert "TestRingOpsCPU" not in globals()
    assert set(SUBSET) <= set(OPINFO_NEEDS)
    assert {op.full_name for op in SUBSET_OPS} == set(SUBSET)
