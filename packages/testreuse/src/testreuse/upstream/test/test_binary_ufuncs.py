# Owner(s): ["module: tests"]
# ruff: noqa: PT009, PT027 - upstream's unittest idioms (assertEqual, assertRaises) are the point of this tree

import numpy as np
import torch
from torch.testing import make_tensor
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
    ops,
)
from torch.testing._internal.common_dtype import all_types_and, floating_types_and, integral_types
from torch.testing._internal.common_methods_invocations import binary_ufuncs
from torch.testing._internal.common_utils import TestCase, run_tests

# Binary ufuncs with a NumPy reference.
binary_ufuncs_with_references = [op for op in binary_ufuncs if op.ref is not None]


def _make_operands(op, lhs_shape, rhs_shape, device, dtype):
    lhs = make_tensor(lhs_shape, device=device, dtype=dtype, **op.lhs_make_tensor_kwargs)
    rhs = make_tensor(rhs_shape, device=device, dtype=dtype, **op.rhs_make_tensor_kwargs)
    return lhs, rhs


class TestBinaryUfuncs(TestCase):
    # Compares the op on small random operands with its NumPy reference.
    @ops(binary_ufuncs_with_references, allowed_dtypes=(torch.float32, torch.int64, torch.bool))
    def test_reference_numerics(self, device, dtype, op):
        lhs, rhs = _make_operands(op, (4, 5), (4, 5), device, dtype)
        actual = op(lhs, rhs)
        expected = op.ref(lhs.cpu().numpy(), rhs.cpu().numpy())
        self.assertEqual(actual, torch.from_numpy(np.asarray(expected)), exact_dtype=False, equal_nan=True)

    # Broadcast operands give the result of their expanded, contiguous copies.
    @ops(binary_ufuncs, allowed_dtypes=(torch.float32,))
    def test_broadcasting(self, device, dtype, op):
        for lhs_shape, rhs_shape in (((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((1,), (2, 2))):
            lhs, rhs = _make_operands(op, lhs_shape, rhs_shape, device, dtype)
            shape = torch.broadcast_shapes(lhs_shape, rhs_shape)
            expected = op(lhs.expand(shape).contiguous(), rhs.expand(shape).contiguous())
            self.assertEqual(op(lhs, rhs), expected, equal_nan=True)

    @ops(binary_ufuncs, allowed_dtypes=(torch.float32,))
    def test_non_contig(self, device, dtype, op):
        lhs, rhs = _make_operands(op, (10, 12), (10, 12), device, dtype)
        expected = op(lhs[:, ::2], rhs[:, ::2])
        self.assertEqual(op(lhs[:, ::2].contiguous(), rhs[:, ::2].contiguous()), expected, equal_nan=True)

    # Mixed int32 and float32 operands give the CPU's result dtype, or the CPU's error.
    @ops(binary_ufuncs, allowed_dtypes=(torch.int32,))
    def test_type_promotion(self, device, dtype, op):
        lhs, rhs = _make_operands(op, (3,), (3,), device, dtype)
        rhs = rhs.to(torch.float32)
        try:
            expected = op(lhs.cpu(), rhs.cpu())
        except Exception as error:
            with self.assertRaises(type(error)):
                op(lhs, rhs)
            return
        self.assertEqual(op(lhs, rhs).dtype, expected.dtype)

    @dtypes(*all_types_and(torch.half, torch.bool))
    def test_embedded_add_with_alpha(self, device, dtype):
        lhs = make_tensor((5,), device=device, dtype=dtype)
        rhs = make_tensor((5,), device=device, dtype=dtype)
        alpha = True if dtype == torch.bool else 2
        self.assertEqual(torch.add(lhs, rhs, alpha=alpha), lhs + alpha * rhs)

    @dtypes(*floating_types_and(torch.half))
    def test_div_rounding_modes(self, device, dtype):
        a = torch.tensor([-7.0, -3.5, 3.5, 7.0], device=device, dtype=dtype)
        b = torch.tensor([2.0, 2.0, -2.0, 2.0], device=device, dtype=dtype)
        for mode, expected in (
            (None, [-3.5, -1.75, -1.75, 3.5]),
            ("trunc", [-3.0, -1.0, -1.0, 3.0]),
            ("floor", [-4.0, -2.0, -2.0, 3.0]),
        ):
            self.assertEqual(
                torch.div(a, b, rounding_mode=mode), torch.tensor(expected, dtype=dtype), exact_device=False
            )

    @dtypes(*integral_types())
    def test_embedded_floor_divide_by_zero_raises(self, device, dtype):
        a = torch.ones(3, device=device, dtype=dtype)
        with self.assertRaisesRegex(RuntimeError, "ZeroDivisionError"):
            torch.floor_divide(a, torch.zeros_like(a))

    @dtypes(torch.float32, torch.float64, torch.int64)
    def test_embedded_pow_scalar_exponents(self, device, dtype):
        base = make_tensor((6,), device=device, dtype=dtype, low=1, high=4)
        for exponent in (0, 1, 2, 3):
            self.assertEqual(torch.pow(base, exponent), torch.from_numpy(np.power(base.cpu().numpy(), exponent)))

    @dtypes(*all_types_and(torch.half, torch.bool))
    def test_embedded_comparison_ops_return_bool(self, device, dtype):
        lhs = make_tensor((7,), device=device, dtype=dtype)
        rhs = make_tensor((7,), device=device, dtype=dtype)
        for op in (torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge):
            result = op(lhs, rhs)
            self.assertEqual(result.dtype, torch.bool)
            self.assertEqual(result, op(lhs.cpu(), rhs.cpu()), exact_device=False)

    @dtypes(torch.float32, torch.float64)
    def test_embedded_inplace_broadcast_into_self(self, device, dtype):
        x = torch.zeros(3, 4, device=device, dtype=dtype)
        x.add_(torch.arange(4, device=device, dtype=dtype))
        self.assertEqual(x, torch.arange(4, dtype=dtype).expand(3, 4), exact_device=False)
        with self.assertRaisesRegex(RuntimeError, "doesn't match the broadcast shape"):
            torch.zeros(1, 4, device=device, dtype=dtype).add_(torch.ones(3, 4, device=device, dtype=dtype))


instantiate_device_type_tests(TestBinaryUfuncs, globals())

if __name__ == "__main__":
    run_tests()
