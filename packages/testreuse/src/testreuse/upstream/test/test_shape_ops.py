# Owner(s): ["module: tests"]
# ruff: noqa: PT009, PT027 - upstream's unittest idioms (assertEqual, assertRaises) are the point of this tree

import numpy as np
import torch
from torch.testing import make_tensor
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
    onlyNativeDeviceTypes,
)
from torch.testing._internal.common_dtype import all_types_and, all_types_and_complex_and
from torch.testing._internal.common_utils import TestCase, run_tests

_all_dtypes = all_types_and_complex_and(torch.half, torch.bfloat16, torch.bool)


def _numpy(t):
    return t.cpu().numpy()


class TestShapeOps(TestCase):
    exact_dtype = True

    @dtypes(*_all_dtypes)
    def test_unbind(self, device, dtype):
        x = make_tensor((2, 3, 4), device=device, dtype=dtype)
        for dim in range(3):
            parts = x.unbind(dim)
            self.assertEqual(len(parts), x.shape[dim])
            for i, part in enumerate(parts):
                self.assertEqual(part, x.select(dim, i))

    @onlyNativeDeviceTypes
    @dtypes(torch.int64, torch.float32, torch.complex64)
    def test_movedim(self, device, dtype):
        x = make_tensor((2, 3, 4, 5), device=device, dtype=dtype)
        for source, destination in (((0,), (3,)), ((1, 2), (0, 3)), ((-1,), (0,))):
            expected = np.moveaxis(_numpy(x), source, destination)
            self.assertEqual(torch.movedim(x, source, destination), torch.from_numpy(expected))

    @dtypes(*_all_dtypes)
    def test_flip(self, device, dtype):
        x = make_tensor((3, 4, 2), device=device, dtype=dtype)
        for dims in ((0,), (1, 2), (0, 1, 2), (-1,)):
            self.assertEqual(torch.flip(x, dims), x.cpu().flip(dims), exact_device=False)

    @dtypes(*all_types_and(torch.half, torch.bool))
    def test_flip_numpy(self, device, dtype):
        x = make_tensor((3, 5), device=device, dtype=dtype)
        self.assertEqual(torch.flip(x, (0, 1)), torch.from_numpy(np.flip(_numpy(x), (0, 1)).copy()))

    @dtypes(*_all_dtypes)
    def test_rot90(self, device, dtype):
        x = make_tensor((3, 4), device=device, dtype=dtype)
        for k in range(-2, 4):
            self.assertEqual(torch.rot90(x, k, (0, 1)), x.cpu().rot90(k, (0, 1)), exact_device=False)

    @dtypes(*_all_dtypes)
    def test_embedded_roll(self, device, dtype):
        x = make_tensor((4, 5), device=device, dtype=dtype)
        for shifts, dims in ((1, 0), (-2, 1), ((1, 2), (0, 1)), (3, None)):
            self.assertEqual(torch.roll(x, shifts, dims), x.cpu().roll(shifts, dims), exact_device=False)

    @dtypes(*all_types_and(torch.half, torch.bool))
    def test_nonzero(self, device, dtype):
        x = make_tensor((4, 6), device=device, dtype=dtype)
        expected = np.stack(np.nonzero(_numpy(x)), axis=1)
        self.assertEqual(torch.nonzero(x), torch.from_numpy(expected), exact_dtype=False)

    @dtypes(*_all_dtypes)
    def test_embedded_squeeze_dims(self, device, dtype):
        x = make_tensor((1, 3, 1, 2), device=device, dtype=dtype)
        self.assertEqual(x.squeeze().shape, (3, 2))
        self.assertEqual(x.squeeze((0, 2)).shape, (3, 2))
        self.assertEqual(x.squeeze(1).shape, (1, 3, 1, 2))

    @dtypes(*_all_dtypes)
    def test_embedded_cat(self, device, dtype):
        a = make_tensor((2, 3), device=device, dtype=dtype)
        b = make_tensor((4, 3), device=device, dtype=dtype)
        self.assertEqual(torch.cat((a, b)), torch.cat((a.cpu(), b.cpu())), exact_device=False)
        self.assertEqual(torch.cat((a, b.t().t()), dim=0).device, a.device)

    @dtypes(*_all_dtypes)
    def test_embedded_stack(self, device, dtype):
        tensors = [make_tensor((2, 3), device=device, dtype=dtype) for _ in range(3)]
        for dim in range(3):
            expected = torch.stack([t.cpu() for t in tensors], dim)
            self.assertEqual(torch.stack(tensors, dim), expected, exact_device=False)

    @dtypes(torch.float32, torch.int64)
    def test_clamp(self, device, dtype):
        x = make_tensor((20,), device=device, dtype=dtype, low=-10, high=10)
        self.assertEqual(torch.clamp(x, -3, 4), torch.from_numpy(np.clip(_numpy(x), -3, 4)))

    @dtypes(*all_types_and(torch.half, torch.bool))
    def test_embedded_tril_triu(self, device, dtype):
        x = make_tensor((4, 5), device=device, dtype=dtype)
        for k in (-1, 0, 2):
            self.assertEqual(torch.tril(x, k), torch.from_numpy(np.tril(_numpy(x), k)))
            self.assertEqual(torch.triu(x, k), torch.from_numpy(np.triu(_numpy(x), k)))

    @dtypes(*_all_dtypes)
    def test_embedded_repeat_and_tile(self, device, dtype):
        x = make_tensor((2, 3), device=device, dtype=dtype)
        self.assertEqual(x.repeat(2, 1, 3), x.cpu().repeat(2, 1, 3), exact_device=False)
        self.assertEqual(torch.tile(x, (2,)), x.cpu().tile((2,)), exact_device=False)

    @dtypes(torch.float32, torch.int64)
    def test_embedded_sort_and_argsort(self, device, dtype):
        x = make_tensor((5, 7), device=device, dtype=dtype)
        values, indices = torch.sort(x, dim=1, stable=True)
        self.assertEqual(values, torch.from_numpy(np.sort(_numpy(x), axis=1, kind="stable")))
        self.assertEqual(indices, torch.from_numpy(np.argsort(_numpy(x), axis=1, kind="stable")), exact_dtype=False)

    @dtypes(*_all_dtypes)
    def test_embedded_diag_embed(self, device, dtype):
        x = make_tensor((2, 3), device=device, dtype=dtype)
        self.assertEqual(torch.diag_embed(x), torch.diag_embed(x.cpu()), exact_device=False)

    def test_embedded_cat_different_devices_raises(self, device):
        a = torch.ones(2, device=device)
        b = torch.ones(2, device="cpu") if torch.device(device).type != "cpu" else torch.ones(2, device="meta")
        with self.assertRaises(RuntimeError):
            torch.cat((a, b))


instantiate_device_type_tests(TestShapeOps, globals())

if __name__ == "__main__":
    run_tests()
