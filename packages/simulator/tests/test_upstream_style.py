"""Upstream-style device-generic tests instantiated on `ring` by torch's own machinery.

`instantiate_device_type_tests` makes one class per device; PrivateUse1TestBase.setUpClass() is called first so
the class name carries the backend's name (`...RING`) and method names end in `_ring_<dtype>`.
"""

from __future__ import annotations

import torch
from ringsim.ops import conformance
from ringsim.ops.registry import FLOATS, OPINFO_NEEDS
from torch.testing._internal.common_device_type import (
    PrivateUse1TestBase,
    instantiate_device_type_tests,
    ops,
)
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase

PrivateUse1TestBase.setUpClass()

SUBSET = ("add", "mul", "exp", "sum", "softmax", "nn.functional.gelu", "mm", "where")
SUBSET_OPS = [op for op in op_db if op.full_name in SUBSET]


class TestRingOps(TestCase):
    @ops(SUBSET_OPS, allowed_dtypes=FLOATS)
    def test_matches_reference(self, device: str, dtype: torch.dtype, op) -> None:
        assert torch.device(device).type == "ring"
        for index, sample in enumerate(op.sample_inputs("cpu", dtype, requires_grad=False)):
            if index == 2:
                break
            why = conformance.check(conformance.Case(op, op.full_name, dtype, index, sample))
            assert why is None


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
