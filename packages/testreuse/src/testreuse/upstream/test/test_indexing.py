# Owner(s): ["module: advanced indexing"]
# ruff: noqa: PT009, PT027 - upstream's unittest idioms (assertEqual, assertRaises) are the point of this tree

import torch
from torch.testing import make_tensor
from torch.testing._internal.common_device_type import (
    dtypes,
    dtypesIfCPU,
    instantiate_device_type_tests,
    onlyNativeDeviceTypes,
)
from torch.testing._internal.common_dtype import all_types_and, all_types_and_complex_and
from torch.testing._internal.common_utils import TestCase, run_tests

_all_dtypes = all_types_and_complex_and(torch.half, torch.bfloat16, torch.bool)


class TestIndexing(TestCase):
    @dtypes(*_all_dtypes)
    def test_index(self, device, dtype):
        reference = make_tensor((3, 3, 3), device=device, dtype=dtype)
        cpu = reference.cpu()
        for index in (0, -1, (1, 2), (slice(None), 1), (Ellipsis, 0), (None, 1), (slice(0, 3, 2), Ellipsis)):
            self.assertEqual(reference[index], cpu[index], exact_device=False)

    @dtypes(*_all_dtypes)
    def test_embedded_advanced_indexing(self, device, dtype):
        x = make_tensor((5, 4), device=device, dtype=dtype)
        rows = torch.tensor([0, 2, 4], device=device)
        cols = torch.tensor([1, 3, 0], device=device)
        self.assertEqual(x[rows], x.cpu()[rows.cpu()], exact_device=False)
        self.assertEqual(x[rows, cols], x.cpu()[rows.cpu(), cols.cpu()], exact_device=False)
        self.assertEqual(x[:, cols], x.cpu()[:, cols.cpu()], exact_device=False)

    @dtypes(*_all_dtypes)
    def test_bool_indices(self, device, dtype):
        x = make_tensor((4, 3), device=device, dtype=dtype)
        mask = torch.tensor([True, False, True, False], device=device)
        self.assertEqual(x[mask], x.cpu()[mask.cpu()], exact_device=False)
        self.assertEqual(x[mask].shape, (2, 3))

    @dtypes(*all_types_and(torch.half))
    def test_byte_mask(self, device, dtype):
        x = make_tensor((4, 3), device=device, dtype=dtype)
        mask = torch.tensor([1, 0, 1, 1], dtype=torch.uint8, device=device)
        with self.assertRaisesRegex(IndexError, "shape of the mask"):
            x[mask[:3]]
        self.assertEqual(x[mask.bool()].shape, (3, 3))

    @dtypes(*_all_dtypes)
    def test_embedded_setitem_scalar_and_slices(self, device, dtype):
        x = torch.zeros(4, 4, device=device, dtype=dtype)
        x[1] = 1
        x[:, 2] = 1
        x[3, 3] = 1
        expected = torch.zeros(4, 4, dtype=dtype)
        expected[1] = 1
        expected[:, 2] = 1
        expected[3, 3] = 1
        self.assertEqual(x, expected, exact_device=False)

    @dtypes(*all_types_and(torch.half))
    def test_step_assignment(self, device, dtype):
        x = torch.zeros(8, device=device, dtype=dtype)
        x[::3] = torch.tensor([1, 2, 3], device=device, dtype=dtype)
        self.assertEqual(x.cpu().tolist(), [1, 0, 0, 2, 0, 0, 3, 0])

    @dtypes(torch.float32, torch.float64, torch.int64)
    def test_embedded_index_put_accumulate(self, device, dtype):
        x = torch.zeros(5, device=device, dtype=dtype)
        indices = torch.tensor([0, 1, 1, 4, 4, 4], device=device)
        values = torch.ones(6, device=device, dtype=dtype)
        x.index_put_((indices,), values, accumulate=True)
        self.assertEqual(x, torch.tensor([1, 2, 0, 0, 3], dtype=dtype), exact_device=False)

    @dtypes(*_all_dtypes)
    def test_embedded_index_copy(self, device, dtype):
        x = torch.zeros(5, 3, device=device, dtype=dtype)
        source = make_tensor((2, 3), device=device, dtype=dtype)
        index = torch.tensor([4, 0], device=device)
        x.index_copy_(0, index, source)
        expected = torch.zeros(5, 3, dtype=dtype).index_copy_(0, index.cpu(), source.cpu())
        self.assertEqual(x, expected, exact_device=False)

    @dtypes(*_all_dtypes)
    def test_embedded_index_fill(self, device, dtype):
        x = make_tensor((4, 3), device=device, dtype=dtype)
        index = torch.tensor([0, 2], device=device)
        value = True if dtype == torch.bool else 7
        self.assertEqual(x.index_fill(1, index, value), x.cpu().index_fill(1, index.cpu(), value), exact_device=False)

    @dtypes(*_all_dtypes)
    def test_embedded_index_select(self, device, dtype):
        x = make_tensor((4, 5), device=device, dtype=dtype)
        index = torch.tensor([3, 0, 3], device=device)
        expected = torch.index_select(x.cpu(), 1, index.cpu())
        self.assertEqual(torch.index_select(x, 1, index), expected, exact_device=False)

    @dtypes(*_all_dtypes)
    def test_embedded_take(self, device, dtype):
        x = make_tensor((3, 4), device=device, dtype=dtype)
        index = torch.tensor([[0, 11], [5, 3]], device=device)
        expected = x.cpu().flatten()[index.cpu()]
        self.assertEqual(torch.take(x, index), expected, exact_device=False)

    @dtypes(*all_types_and(torch.half, torch.bool))
    def test_embedded_put(self, device, dtype):
        x = torch.zeros(3, 4, device=device, dtype=dtype)
        index = torch.tensor([1, 6, 11], device=device)
        values = make_tensor((3,), device=device, dtype=dtype)
        x.put_(index, values)
        self.assertEqual(x.view(-1)[index], values)

    @dtypes(*_all_dtypes)
    def test_embedded_gather_scatter(self, device, dtype):
        x = make_tensor((3, 4), device=device, dtype=dtype)
        index = torch.tensor([[0, 1], [3, 2], [1, 1]], device=device)
        gathered = torch.gather(x, 1, index)
        self.assertEqual(gathered, torch.gather(x.cpu(), 1, index.cpu()), exact_device=False)
        scattered = torch.zeros(3, 4, device=device, dtype=dtype).scatter_(1, index, gathered)
        expected = torch.zeros(3, 4, dtype=dtype).scatter_(1, index.cpu(), gathered.cpu())
        self.assertEqual(scattered, expected, exact_device=False)

    @dtypes(*_all_dtypes)
    def test_embedded_masked_fill(self, device, dtype):
        x = make_tensor((3, 4), device=device, dtype=dtype)
        mask = torch.tensor([[True, False, False, True]], device=device)
        value = False if dtype == torch.bool else 5
        self.assertEqual(x.masked_fill(mask, value), x.cpu().masked_fill(mask.cpu(), value), exact_device=False)

    @onlyNativeDeviceTypes
    @dtypes(torch.float32)
    @dtypesIfCPU(torch.float32, torch.float64)
    def test_empty_index(self, device, dtype):
        x = make_tensor((3, 4), device=device, dtype=dtype)
        empty = torch.tensor([], dtype=torch.long, device=device)
        self.assertEqual(x[empty].shape, (0, 4))
        x[empty] = 1
        self.assertEqual(x[empty].numel(), 0)

    def test_embedded_index_out_of_bounds_raises(self, device):
        x = torch.zeros(3, device=device)
        with self.assertRaises(IndexError):
            x[3]
        with self.assertRaisesRegex(IndexError, "out of range"):
            torch.index_select(x, 0, torch.tensor([5], device=device)).cpu()

    def test_embedded_int_index_on_device_tensor(self, device):
        x = torch.arange(10, device=device)
        i = torch.tensor(4, device=device)
        self.assertEqual(x[i].item(), 4)
        self.assertEqual(x[x > 6].cpu().tolist(), [7, 8, 9])


instantiate_device_type_tests(TestIndexing, globals())

if __name__ == "__main__":
    run_tests()
