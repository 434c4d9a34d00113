# Owner(s): ["module: tests"]
# ruff: noqa: PT009 - upstream's unittest idioms (assertEqual) are the point of this tree

import math

import numpy as np
import torch
from torch.testing import make_tensor
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
    ops,
    precisionOverride,
)
from torch.testing._internal.common_dtype import all_types_and, floating_types_and
from torch.testing._internal.common_methods_invocations import unary_ufuncs
from torch.testing._internal.common_utils import TestCase, run_tests

# frexp returns (mantissa, exponent), not one tensor; test_frexp covers it.
_single_output_ufuncs = [op for op in unary_ufuncs if "frexp" not in op.name]
# Unary ufuncs with a NumPy reference.
reference_filtered_ops = [op for op in _single_output_ufuncs if op.ref is not None]


def _make_input(op, shape, device, dtype):
    low, high = op.domain
    return make_tensor(shape, device=device, dtype=dtype, low=low, high=high)


class TestUnaryUfuncs(TestCase):
    exact_dtype = True

    # Compares the op on a normally distributed input with its NumPy reference.
    @ops(reference_filtered_ops, allowed_dtypes=(torch.float32, torch.int64))
    def test_reference_numerics_normal(self, device, dtype, op):
        t = _make_input(op, (5, 7), device, dtype)
        torch_kwargs, numpy_kwargs = op.sample_kwargs(device, dtype, t)
        actual = op(t, **torch_kwargs)
        expected = op.ref(t.cpu().numpy(), **numpy_kwargs)
        self.assertEqual(actual, torch.from_numpy(np.asarray(expected)), exact_dtype=False, equal_nan=True)

    @ops(_single_output_ufuncs, allowed_dtypes=(torch.float32,))
    def test_contig_vs_every_other(self, device, dtype, op):
        contig = _make_input(op, (130,), device, dtype)
        non_contig = contig[::2]
        self.assertTrue(contig.is_contiguous())
        self.assertFalse(non_contig.is_contiguous())
        torch_kwargs, _ = op.sample_kwargs(device, dtype, contig)
        self.assertEqual(op(contig, **torch_kwargs)[::2], op(non_contig, **torch_kwargs), equal_nan=True)

    @ops(_single_output_ufuncs, allowed_dtypes=(torch.float32,))
    def test_contig_vs_transposed(self, device, dtype, op):
        contig = _make_input(op, (13, 11), device, dtype)
        non_contig = contig.T
        self.assertFalse(non_contig.is_contiguous())
        torch_kwargs, _ = op.sample_kwargs(device, dtype, contig)
        self.assertEqual(op(contig, **torch_kwargs).T, op(non_contig, **torch_kwargs), equal_nan=True)

    @ops(_single_output_ufuncs, allowed_dtypes=(torch.float32,))
    def test_non_contig_expand(self, device, dtype, op):
        for shape in ((1, 3), (1, 7), (5, 7)):
            contig = _make_input(op, shape, device, dtype)
            non_contig = contig.clone().expand(3, -1, -1)
            self.assertFalse(non_contig.is_contiguous())
            torch_kwargs, _ = op.sample_kwargs(device, dtype, contig)
            contig = op(contig, **torch_kwargs)
            non_contig = op(non_contig, **torch_kwargs)
            for i in range(3):
                self.assertEqual(contig, non_contig[i], equal_nan=True)

    @ops(_single_output_ufuncs, allowed_dtypes=(torch.float32, torch.float64))
    def test_contig_size1(self, device, dtype, op):
        contig = _make_input(op, (5, 100), device, dtype)
        contig = contig[:1, :50]
        contig2 = torch.empty(contig.size(), device=device, dtype=dtype)
        contig2.copy_(contig)
        self.assertTrue(contig.is_contiguous())
        self.assertTrue(contig2.is_contiguous())
        torch_kwargs, _ = op.sample_kwargs(device, dtype, contig)
        self.assertEqual(op(contig, **torch_kwargs), op(contig2, **torch_kwargs), equal_nan=True)

    @dtypes(*floating_types_and(torch.half, torch.bfloat16))
    def test_nan_to_num(self, device, dtype):
        x = torch.tensor([float("nan"), float("inf"), -float("inf"), 3.14], device=device, dtype=dtype)
        result = torch.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0)
        self.assertEqual(result, torch.tensor([1.0, 2.0, -2.0, 3.14], dtype=dtype), exact_device=False)

    @dtypes(*all_types_and(torch.half))
    def test_abs_zero(self, device, dtype):
        zero = torch.zeros(4, device=device, dtype=dtype)
        self.assertEqual(torch.abs(zero), zero)

    @precisionOverride({torch.float32: 1e-4})
    @dtypes(torch.float32, torch.float64)
    def test_embedded_exp_large_values(self, device, dtype):
        x = torch.tensor([0.0, 1.0, 20.0, 80.0], device=device, dtype=dtype)
        expected = torch.tensor([math.exp(v) for v in (0.0, 1.0, 20.0, 80.0)], dtype=torch.float64)
        self.assertEqual(torch.exp(x), expected.to(dtype), exact_device=False, rtol=self.precision, atol=0)

    @dtypes(torch.float32, torch.float64)
    def test_frexp(self, device, dtype):
        x = make_tensor((20,), device=device, dtype=dtype)
        mantissa, exponent = torch.frexp(x)
        np_mantissa, np_exponent = np.frexp(x.cpu().numpy())
        self.assertEqual(mantissa, torch.from_numpy(np_mantissa))
        self.assertEqual(exponent, torch.from_numpy(np_exponent), exact_dtype=False)

    @dtypes(torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
    def test_bitwise_not(self, device, dtype):
        x = make_tensor((16,), device=device, dtype=dtype)
        self.assertEqual(torch.bitwise_not(x), torch.from_numpy(np.invert(x.cpu().numpy())))


instantiate_device_type_tests(TestUnaryUfuncs, globals())

if __name__ == "__main__":
    run_tests()
