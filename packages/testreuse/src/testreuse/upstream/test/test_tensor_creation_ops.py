# Owner(s): ["module: tensor creation"]
# ruff: noqa: PT009 - upstream's unittest idioms (assertEqual) are the point of this tree

import numpy as np
import torch
from torch.testing._internal.common_device_type import (
    deviceCountAtLeast,
    dtypes,
    dtypesIfCUDA,
    instantiate_device_type_tests,
    onlyCPU,
    onlyCUDA,
    onlyNativeDeviceTypes,
    precisionOverride,
    skipMeta,
)
from torch.testing._internal.common_dtype import all_types_and, all_types_and_complex_and, floating_types
from torch.testing._internal.common_utils import TestCase, run_tests

_all_dtypes = all_types_and_complex_and(torch.half, torch.bfloat16, torch.bool)


class TestTensorCreation(TestCase):
    exact_dtype = True

    @dtypes(*_all_dtypes)
    def test_zeros(self, device, dtype):
        x = torch.zeros((3, 4), device=device, dtype=dtype)
        self.assertEqual(x.device.type, torch.device(device).type)
        self.assertEqual(x, torch.zeros(3, 4, dtype=dtype), exact_device=False)
        self.assertEqual(x.untyped_storage().nbytes(), 12 * x.element_size())

    @dtypes(*_all_dtypes)
    def test_embedded_ones_like(self, device, dtype):
        base = torch.empty((2, 5), device=device, dtype=dtype)
        x = torch.ones_like(base)
        self.assertEqual(x.device, base.device)
        self.assertEqual(x, torch.ones(2, 5, dtype=dtype), exact_device=False)

    @dtypes(*all_types_and(torch.half, torch.bfloat16))
    def test_embedded_full(self, device, dtype):
        x = torch.full((2, 3), 7, device=device, dtype=dtype)
        self.assertEqual(x, torch.full((2, 3), 7, dtype=dtype), exact_device=False)

    @dtypes(*all_types_and(torch.half, torch.bfloat16))
    def test_arange(self, device, dtype):
        x = torch.arange(0, 10, 2, device=device, dtype=dtype)
        self.assertEqual(x, torch.arange(0, 10, 2, dtype=dtype), exact_device=False)

    @precisionOverride({torch.float32: 1e-5, torch.float64: 1e-10})
    @dtypes(*floating_types())
    def test_linspace(self, device, dtype):
        x = torch.linspace(-1, 1, 11, device=device, dtype=dtype)
        self.assertEqual(x, np.linspace(-1, 1, 11), exact_dtype=False, atol=self.precision, rtol=0)

    @dtypes(*all_types_and(torch.bool))
    def test_eye(self, device, dtype):
        self.assertEqual(torch.eye(3, 4, device=device, dtype=dtype), torch.eye(3, 4, dtype=dtype), exact_device=False)

    @dtypes(torch.float32, torch.int64)
    def test_empty_strided(self, device, dtype):
        x = torch.empty_strided((2, 3), (1, 2), device=device, dtype=dtype)
        self.assertEqual(x.stride(), (1, 2))
        self.assertEqual(x.untyped_storage().nbytes(), 6 * x.element_size())

    # Narrower dtypes on CUDA: the test runs on float32/float64 everywhere else.
    @dtypes(torch.float32, torch.float64)
    @dtypesIfCUDA(torch.half, torch.bfloat16, torch.float32, torch.float64)
    def test_embedded_randn_moments(self, device, dtype):
        torch.manual_seed(0)
        x = torch.randn(4000, device=device, dtype=dtype)
        self.assertEqual(x.mean().item(), 0.0, atol=0.1, rtol=0)
        self.assertEqual(x.std().item(), 1.0, atol=0.1, rtol=0)

    @dtypes(*_all_dtypes)
    def test_embedded_tensor_from_list(self, device, dtype):
        values = [[1, 0], [0, 1]]
        x = torch.tensor(values, device=device, dtype=dtype)
        self.assertEqual(x, torch.tensor(values, dtype=dtype), exact_device=False)

    def test_tensor_factory_type_inference(self, device):
        self.assertEqual(torch.tensor([1, 2], device=device).dtype, torch.int64)
        self.assertEqual(torch.tensor([1.0, 2], device=device).dtype, torch.get_default_dtype())
        self.assertEqual(torch.tensor([True], device=device).dtype, torch.bool)
        self.assertEqual(torch.tensor([1j], device=device).dtype, torch.complex64)

    @dtypes(torch.float32, torch.int64)
    def test_embedded_new_factories_keep_device(self, device, dtype):
        base = torch.zeros(2, device=device, dtype=dtype)
        for x in (base.new_zeros(3), base.new_ones(3), base.new_full((3,), 2), base.new_empty(3), base.new_tensor([1])):
            self.assertEqual(x.device, base.device)
            self.assertEqual(x.dtype, dtype)

    @skipMeta
    @dtypes(torch.float32)
    def test_embedded_clone_preserves_values_and_strides(self, device, dtype):
        x = torch.arange(12, device=device, dtype=dtype).view(3, 4).t()
        y = x.clone()
        self.assertEqual(y.stride(), x.stride())
        self.assertNotEqual(y.data_ptr(), x.data_ptr())
        self.assertEqual(y, x)

    @onlyNativeDeviceTypes
    def test_embedded_to_and_from_cpu(self, device):
        cpu = torch.randn(3, 4)
        self.assertEqual(cpu.to(device).cpu(), cpu)
        self.assertEqual(cpu.to(device, torch.float64).cpu(), cpu.double())

    @deviceCountAtLeast(2)
    def test_embedded_copy_between_devices(self, devices):
        x = torch.arange(6.0, device=devices[0])
        y = x.to(devices[1])
        self.assertEqual(y.device, torch.device(devices[1]))
        self.assertEqual(y.cpu(), x.cpu())

    @onlyCPU
    def test_embedded_from_numpy_shares_memory(self, device):
        array = np.arange(4.0)
        x = torch.from_numpy(array)
        array[0] = 7
        self.assertEqual(x[0].item(), 7.0)

    @onlyCPU
    @dtypes(torch.float32, torch.int32)
    def test_embedded_numpy_roundtrip(self, device, dtype):
        x = torch.ones(3, dtype=dtype)
        self.assertEqual(torch.from_numpy(x.numpy()), x)

    @onlyCUDA
    def test_embedded_pin_memory_copy(self, device):
        pinned = torch.ones(4).pin_memory()
        self.assertTrue(pinned.is_pinned())
        self.assertEqual(pinned.to(device, non_blocking=True).cpu(), pinned)

    @onlyCUDA
    @dtypes(torch.half, torch.float32)
    def test_embedded_cuda_tensor_type(self, device, dtype):
        self.assertTrue(torch.ones(2, device=device, dtype=dtype).is_cuda)


instantiate_device_type_tests(TestTensorCreation, globals())

if __name__ == "__main__":
    run_tests()
