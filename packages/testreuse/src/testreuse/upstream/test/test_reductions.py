# Owner(s): ["module: tests"]
# ruff: noqa: PT009 - upstream's unittest idioms (assertEqual) are the point of this tree

import numpy as np
import torch
from torch.testing import make_tensor
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
    ops,
)
from torch.testing._internal.common_dtype import all_types_and, floating_and_complex_types_and
from torch.testing._internal.common_methods_invocations import reduction_ops
from torch.testing._internal.common_utils import TestCase, run_tests

_reduction_dtypes = (torch.float32, torch.int64, torch.bool)


def _reduced_shape(shape, dim=None, keepdim=False):
    """The shape a reduction over dim produces from shape."""
    if dim is None:
        return [1] * len(shape) if keepdim else []
    dims = dim if isinstance(dim, (tuple, list)) else [dim]
    dims = {d % max(len(shape), 1) for d in dims}
    return [1 if i in dims else size for i, size in enumerate(shape) if keepdim or i not in dims]


class TestReductions(TestCase):
    def _test_dim_keepdim(self, op, device, dtype, *, ndim, **dim_keepdim):
        t = make_tensor((2, 3, 4, 5)[:ndim], dtype=dtype, device=device)
        args, kwargs = next(op.generate_args_kwargs(t, **dim_keepdim))
        result = op(t, *args, **dim_keepdim, **kwargs)
        self.assertEqual(result.shape, _reduced_shape(t.shape, **dim_keepdim))
        expected = op(t.cpu(), *args, **dim_keepdim, **kwargs)
        self.assertEqual(result, expected, exact_device=False, equal_nan=True)

    @ops(reduction_ops, allowed_dtypes=_reduction_dtypes)
    def test_dim_default(self, device, dtype, op):
        self._test_dim_keepdim(op, device, dtype, ndim=4)

    @ops(reduction_ops, allowed_dtypes=_reduction_dtypes)
    def test_dim_default_keepdim(self, device, dtype, op):
        self._test_dim_keepdim(op, device, dtype, ndim=4, keepdim=True)

    @ops(reduction_ops, allowed_dtypes=_reduction_dtypes)
    def test_dim_single(self, device, dtype, op):
        self._test_dim_keepdim(op, device, dtype, ndim=3, dim=-1)

    @ops(reduction_ops, allowed_dtypes=_reduction_dtypes)
    def test_dim_single_keepdim(self, device, dtype, op):
        self._test_dim_keepdim(op, device, dtype, ndim=3, dim=1, keepdim=True)

    @ops([op for op in reduction_ops if op.supports_multiple_dims], allowed_dtypes=_reduction_dtypes)
    def test_dim_multi(self, device, dtype, op):
        self._test_dim_keepdim(op, device, dtype, ndim=4, dim=[0, 2])

    # A reduction over a noncontiguous input gives the result of its contiguous copy.
    @ops(reduction_ops, allowed_dtypes=(torch.float32,))
    def test_noncontiguous_innermost(self, device, dtype, op):
        t = make_tensor((10, 10), dtype=dtype, device=device)
        args, kwargs = next(op.generate_args_kwargs(t, dim=1))
        self.assertEqual(op(t[:, ::2], *args, dim=1, **kwargs), op(t[:, ::2].contiguous(), *args, dim=1, **kwargs))

    # Reducing an empty tensor gives the identity, if the op has one.
    @ops([op for op in reduction_ops if op.identity is not None], allowed_dtypes=(torch.float32,))
    def test_embedded_empty_tensor_identity(self, device, dtype, op):
        t = make_tensor((0, 4), dtype=dtype, device=device)
        args, kwargs = next(op.generate_args_kwargs(t, dim=0))
        result = op(t, *args, dim=0, **kwargs)
        self.assertEqual(result, torch.full((4,), op.identity, dtype=result.dtype), exact_device=False)

    @dtypes(*all_types_and(torch.half, torch.bool))
    def test_sum_all(self, device, dtype):
        x = make_tensor((6, 7), device=device, dtype=dtype)
        self.assertEqual(x.sum(), torch.from_numpy(np.asarray(x.cpu().numpy().sum())), exact_dtype=False)

    @dtypes(*floating_and_complex_types_and(torch.half))
    def test_mean_dim(self, device, dtype):
        x = make_tensor((4, 6), device=device, dtype=dtype)
        self.assertEqual(x.mean(dim=1), x.cpu().mean(dim=1), exact_device=False)

    @dtypes(torch.float32, torch.float64, torch.int32, torch.int64)
    def test_embedded_max_min_with_indices(self, device, dtype):
        x = torch.tensor([[3, 1, 2], [0, 5, 4]], device=device, dtype=dtype)
        values, indices = x.max(dim=1)
        self.assertEqual(values, torch.tensor([3, 5], dtype=dtype), exact_device=False)
        self.assertEqual(indices, torch.tensor([0, 1]), exact_device=False)
        values, indices = x.min(dim=0)
        self.assertEqual(values, torch.tensor([0, 1, 2], dtype=dtype), exact_device=False)
        self.assertEqual(indices, torch.tensor([1, 0, 0]), exact_device=False)

    @dtypes(torch.float32, torch.float64)
    def test_embedded_var_std_correction(self, device, dtype):
        x = make_tensor((5, 8), device=device, dtype=dtype)
        for correction in (0, 1):
            self.assertEqual(
                torch.var(x, dim=1, correction=correction), np.var(x.cpu().numpy(), axis=1, ddof=correction)
            )
            self.assertEqual(
                torch.std(x, dim=0, correction=correction), np.std(x.cpu().numpy(), axis=0, ddof=correction)
            )

    @dtypes(torch.float32, torch.int64, torch.bool)
    def test_all_any(self, device, dtype):
        x = make_tensor((3, 4), device=device, dtype=dtype)
        self.assertEqual(x.all(dim=1), x.cpu().all(dim=1), exact_device=False)
        self.assertEqual(x.any(), x.cpu().any(), exact_device=False)

    @dtypes(torch.float32, torch.float64)
    def test_embedded_cumsum_matches_numpy(self, device, dtype):
        x = make_tensor((4, 5), device=device, dtype=dtype)
        self.assertEqual(torch.cumsum(x, dim=1), np.cumsum(x.cpu().numpy(), axis=1))


instantiate_device_type_tests(TestReductions, globals())

if __name__ == "__main__":
    run_tests()
