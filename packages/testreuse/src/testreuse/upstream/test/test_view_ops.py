# Owner(s): ["module: tests"]
# ruff: noqa: PT009, PT027 - upstream's unittest idioms (assertEqual, assertRaises) are the point of this tree

import torch
from torch.testing import make_tensor
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
    onlyNativeDeviceTypes,
)
from torch.testing._internal.common_dtype import all_types_and, all_types_and_complex_and, complex_types
from torch.testing._internal.common_utils import TestCase, run_tests

_all_dtypes = all_types_and_complex_and(torch.half, torch.bfloat16, torch.bool)


class TestViewOps(TestCase):
    exact_dtype = True

    # A view shares its base's storage, on every device: real storage is what makes a view a view.
    def is_view_of(self, base, other):
        if not other._is_view() or other is base or other._base is not base or base.device != other.device:
            return False
        return base.untyped_storage().data_ptr() == other.untyped_storage().data_ptr()

    # Writing through the view is visible in the base.
    def _assert_writes_through(self, base, view):
        self.assertTrue(self.is_view_of(base, view))
        value = base.dtype != torch.bool
        view.fill_(value)
        seen_from_base = base.cpu().as_strided(view.size(), view.stride(), view.storage_offset())
        self.assertEqual(seen_from_base, torch.full(view.size(), value, dtype=base.dtype))

    @onlyNativeDeviceTypes
    @dtypes(*_all_dtypes)
    def test_view_dtype_new(self, device, dtype):
        t = make_tensor((4, 8), device=device, dtype=dtype)
        v = t.view(torch.uint8)
        self.assertEqual(v.untyped_storage().data_ptr(), t.untyped_storage().data_ptr())
        self.assertEqual(v.shape[-1], 8 * t.element_size())
        self.assertEqual(v.cpu(), t.cpu().view(torch.uint8))

    @dtypes(*complex_types())
    def test_view_as_real(self, device, dtype):
        t = make_tensor((3, 4), device=device, dtype=dtype)
        v = torch.view_as_real(t)
        self.assertTrue(self.is_view_of(t, v))
        self.assertEqual(v[..., 0], t.real)
        self.assertEqual(v.stride(), (8, 2, 1))

    @dtypes(torch.float32, torch.float64)
    def test_view_as_complex(self, device, dtype):
        t = make_tensor((3, 4, 2), device=device, dtype=dtype)
        v = torch.view_as_complex(t)
        self.assertTrue(self.is_view_of(t, v))
        self.assertEqual(v.real, t[..., 0])

    @dtypes(*_all_dtypes)
    def test_view_view(self, device, dtype):
        t = make_tensor((5, 6), device=device, dtype=dtype)
        self._assert_writes_through(t, t.view(30))

    @dtypes(*_all_dtypes)
    def test_view_as_view(self, device, dtype):
        t = make_tensor((5, 6), device=device, dtype=dtype)
        self._assert_writes_through(t, t.view_as(torch.empty(3, 10)))

    @dtypes(*_all_dtypes)
    def test_transpose_view(self, device, dtype):
        t = make_tensor((5, 6), device=device, dtype=dtype)
        v = t.transpose(0, 1)
        self.assertEqual(v.stride(), (1, 6))
        self._assert_writes_through(t, v)

    @dtypes(*_all_dtypes)
    def test_permute_view(self, device, dtype):
        t = make_tensor((2, 3, 4), device=device, dtype=dtype)
        v = t.permute(2, 0, 1)
        self.assertEqual(v.stride(), (1, 12, 4))
        self._assert_writes_through(t, v)

    @dtypes(*_all_dtypes)
    def test_diagonal_view(self, device, dtype):
        t = make_tensor((5, 5), device=device, dtype=dtype)
        v = torch.diagonal(t)
        self.assertEqual(v.stride(), (6,))
        self._assert_writes_through(t, v)
        self.assertEqual(t.cpu().diagonal(), v.cpu())

    @dtypes(*_all_dtypes)
    def test_select_view(self, device, dtype):
        t = make_tensor((5, 5), device=device, dtype=dtype)
        v = t.select(0, 2)
        self.assertEqual(v.storage_offset(), 10)
        self._assert_writes_through(t, v)

    @dtypes(*_all_dtypes)
    def test_narrow_view(self, device, dtype):
        t = make_tensor((5, 5), device=device, dtype=dtype)
        v = torch.narrow(t, 1, 2, 2)
        self.assertEqual(v.storage_offset(), 2)
        self._assert_writes_through(t, v)

    @dtypes(*_all_dtypes)
    def test_expand_view(self, device, dtype):
        t = make_tensor((5, 1), device=device, dtype=dtype)
        v = t.expand(5, 4)
        self.assertTrue(self.is_view_of(t, v))
        self.assertEqual(v.stride(), (1, 0))

    @dtypes(*_all_dtypes)
    def test_embedded_squeeze_unsqueeze_view(self, device, dtype):
        t = make_tensor((5, 1, 3), device=device, dtype=dtype)
        self.assertTrue(self.is_view_of(t, t.squeeze(1)))
        self._assert_writes_through(t, t.unsqueeze(0))

    @dtypes(*_all_dtypes)
    def test_unfold_view(self, device, dtype):
        t = make_tensor((10,), device=device, dtype=dtype)
        v = t.unfold(0, 3, 2)
        self.assertEqual(v.stride(), (2, 1))
        self._assert_writes_through(t, v)

    @dtypes(*_all_dtypes)
    def test_as_strided_view(self, device, dtype):
        t = make_tensor((4, 4), device=device, dtype=dtype)
        v = t.as_strided((2, 2), (1, 4), 1)
        self.assertEqual(v.cpu(), t.cpu().as_strided((2, 2), (1, 4), 1))
        self._assert_writes_through(t, v)

    @dtypes(*_all_dtypes)
    def test_unbind_view(self, device, dtype):
        t = make_tensor((3, 4), device=device, dtype=dtype)
        for i, v in enumerate(t.unbind(0)):
            self.assertTrue(self.is_view_of(t, v))
            self.assertEqual(v.storage_offset(), 4 * i)

    @dtypes(*_all_dtypes)
    def test_split_view(self, device, dtype):
        t = make_tensor((6, 4), device=device, dtype=dtype)
        for v in t.split(2):
            self.assertTrue(self.is_view_of(t, v))
        for v in t.chunk(3, dim=1):
            self.assertTrue(self.is_view_of(t, v))

    @dtypes(*_all_dtypes)
    def test_movedim_view(self, device, dtype):
        t = make_tensor((2, 3, 4), device=device, dtype=dtype)
        self._assert_writes_through(t, torch.movedim(t, 0, 2))

    @dtypes(*_all_dtypes)
    def test_reshape_view(self, device, dtype):
        t = make_tensor((4, 6), device=device, dtype=dtype)
        self.assertTrue(self.is_view_of(t, t.reshape(24)))
        non_contig = t.t()
        copy = non_contig.reshape(24)
        self.assertFalse(copy._is_view())
        self.assertEqual(copy.cpu(), non_contig.cpu().reshape(24))

    @dtypes(*_all_dtypes)
    def test_flatten_view(self, device, dtype):
        t = make_tensor((2, 3, 4), device=device, dtype=dtype)
        self.assertTrue(self.is_view_of(t, t.flatten(1)))
        self.assertFalse(t.transpose(0, 2).flatten()._is_view())

    @dtypes(*_all_dtypes)
    def test_contiguous_self(self, device, dtype):
        t = make_tensor((3, 4), device=device, dtype=dtype)
        self.assertTrue(t.contiguous() is t)

    @dtypes(*_all_dtypes)
    def test_contiguous_nonview(self, device, dtype):
        t = make_tensor((3, 4), device=device, dtype=dtype).t()
        c = t.contiguous()
        self.assertTrue(c.is_contiguous())
        self.assertNotEqual(c.data_ptr(), t.data_ptr())
        self.assertEqual(c.stride(), (3, 1))

    @dtypes(*_all_dtypes)
    def test_basic_indexing_slice_view(self, device, dtype):
        t = make_tensor((5, 5), device=device, dtype=dtype)
        v = t[1:4, ::2]
        self.assertEqual(v.stride(), (5, 2))
        self.assertEqual(v.storage_offset(), 5)
        self._assert_writes_through(t, v)

    @dtypes(*_all_dtypes)
    def test_advanced_indexing_nonview(self, device, dtype):
        t = make_tensor((5, 5), device=device, dtype=dtype)
        v = t[[0, 2]]
        self.assertFalse(self.is_view_of(t, v))
        self.assertNotEqual(v.untyped_storage().data_ptr(), t.untyped_storage().data_ptr())

    @dtypes(*complex_types())
    def test_real_imag_view(self, device, dtype):
        t = make_tensor((3, 3), device=device, dtype=dtype)
        self.assertTrue(self.is_view_of(t, t.real))
        self.assertTrue(self.is_view_of(t, t.imag))
        t.real.fill_(2)
        self.assertEqual(t.real, torch.full((3, 3), 2.0), exact_dtype=False, exact_device=False)

    @dtypes(*all_types_and(torch.half, torch.bool))
    def test_imag_noncomplex(self, device, dtype):
        t = make_tensor((3,), device=device, dtype=dtype)
        with self.assertRaises(RuntimeError):
            _ = t.imag

    @dtypes(*_all_dtypes)
    def test_embedded_view_copy_is_not_a_view(self, device, dtype):
        t = make_tensor((4, 4), device=device, dtype=dtype)
        c = torch.view_copy(t, (16,))
        self.assertFalse(c._is_view())
        self.assertEqual(c.cpu(), t.cpu().view(16))

    def test_embedded_view_incompatible_stride_raises(self, device):
        t = torch.ones(4, 6, device=device).t()
        with self.assertRaisesRegex(RuntimeError, "view size is not compatible"):
            t.view(24)


instantiate_device_type_tests(TestViewOps, globals())

if __name__ == "__main__":
    run_tests()
