"""The fallback device is a real privateuse1 device: real storage, real views, torch's test machinery sees it."""

import pathlib
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import fallback_backend
import pytest
import torch


def test_load_registers_the_device_once(fallback_device: str) -> None:
    assert fallback_device == fallback_backend.DEVICE_NAME
    assert fallback_backend.load() == fallback_device
    assert torch._C._get_privateuse1_backend_name() == fallback_device
    module = getattr(torch, fallback_device)
    assert module.is_available()
    assert module.device_count() == 2
    assert module.current_device() == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool, torch.complex64])
def test_values_round_trip_through_device_memory(fallback_device: str, dtype: torch.dtype) -> None:
    expected = torch.arange(6).reshape(2, 3).to(dtype)
    on_device = expected.to(fallback_device)
    assert on_device.device.type == fallback_device
    assert on_device.dtype == dtype
    assert torch.equal(on_device.cpu(), expected)


def test_tensor_has_device_storage(fallback_device: str) -> None:
    tensor = torch.empty((3, 4), device=fallback_device)
    storage = tensor.untyped_storage()
    assert storage.device == tensor.device
    assert storage.nbytes() == 3 * 4 * 4
    assert tensor.data_ptr() == storage.data_ptr() != 0
    assert getattr(tensor, f"is_{fallback_device}")


def test_views_share_storage_and_have_real_strides(fallback_device: str) -> None:
    base = torch.arange(24.0, device=fallback_device).view(2, 3, 4)
    transposed = base.transpose(0, 2)
    row = base[1, 2]
    strided = base.as_strided((2, 2), (1, 4), 1)

    assert base.stride() == (12, 4, 1)
    assert transposed.stride() == (1, 4, 12)
    assert not transposed.is_contiguous()
    assert row.storage_offset() == 20
    for view in (transposed, row, strided):
        assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert torch.equal(strided.cpu(), torch.tensor([[1.0, 5.0], [2.0, 6.0]]))

    row.fill_(-1.0)
    assert torch.equal(base.cpu()[1, 2], torch.full((4,), -1.0))
    assert torch.equal(transposed.contiguous().cpu(), base.cpu().transpose(0, 2).contiguous())


def test_operator_without_device_kernel_runs_through_cpu_fallback(fallback_device: str) -> None:
    left, right = torch.randn(3, 5), torch.randn(5, 2)
    product = torch.mm(left.to(fallback_device), right.to(fallback_device))
    assert product.device.type == fallback_device
    torch.testing.assert_close(product.cpu(), left @ right)

    out = torch.empty(0, device=fallback_device)
    torch.add(left.to(fallback_device), 1.0, out=out)
    assert out.shape == (3, 5)
    torch.testing.assert_close(out.cpu(), left + 1.0)
    assert out.sum().item() == pytest.approx((left + 1.0).sum().item(), rel=1e-5)


def test_conjugate_and_negative_views_copy_correctly(fallback_device: str) -> None:
    values = torch.randn(4, dtype=torch.complex64)
    on_device = values.to(fallback_device)
    assert on_device.conj().is_conj()
    assert torch.equal(on_device.conj().cpu(), values.conj())
    assert torch.equal(on_device.conj().neg().cpu(), values.conj().neg())
    assert torch.equal(on_device.conj().resolve_conj().cpu(), values.conj())


def test_resize_and_set_keep_tensors_on_device(fallback_device: str) -> None:
    grown = torch.empty(0, device=fallback_device).resize_(2, 5)
    assert grown.shape == (2, 5)
    assert grown.untyped_storage().nbytes() >= 40
    assert grown.device.type == fallback_device

    source = torch.arange(6.0, device=fallback_device)
    aliased = torch.empty(0, device=fallback_device).set_(source.untyped_storage(), 1, (2, 2), (1, 2))
    assert aliased.data_ptr() == source.data_ptr() + 4
    assert torch.equal(aliased.cpu(), torch.tensor([[1.0, 3.0], [2.0, 4.0]]))


def test_second_device_is_addressable(fallback_device: str) -> None:
    module = getattr(torch, fallback_device)
    moved = torch.ones(3, device=fallback_device).to(f"{fallback_device}:1")
    assert moved.device.index == 1
    assert moved.untyped_storage().device.index == 1
    assert torch.equal(moved.cpu(), torch.ones(3))
    module.set_device(1)
    try:
        assert torch.empty(1, device=fallback_device).device.index == 1
    finally:
        module.set_device(0)


GENERIC_TESTS = """
    import torch
    from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests, onlyCPU
    from torch.testing._internal.common_utils import TestCase, run_tests


    class TestGeneric(TestCase):
        @dtypes(torch.float32, torch.int64)
        def test_fill(self, device, dtype):
            tensor = torch.zeros(3, device=device, dtype=dtype).fill_(2)
            self.assertEqual(tensor.device.type, self.device_type)
            self.assertEqual(tensor, torch.full((3,), 2, dtype=dtype))

        @onlyCPU
        def test_cpu_only(self, device):
            pass


    instantiate_device_type_tests(TestGeneric, globals())

    if __name__ == "__main__":
        run_tests()
"""


def test_device_generic_tests_are_instantiated_for_the_device(
    fallback_plugin_args: list[str], tmp_path: pathlib.Path
) -> None:
    test_file = tmp_path / "test_generic.py"
    test_file.write_text(textwrap.dedent(GENERIC_TESTS))
    junit = tmp_path / "junit.xml"
    pytest_args = ["-n", "2", "-p", "no:cacheprovider", "-q", f"--junitxml={junit}", str(test_file)]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *fallback_plugin_args, *pytest_args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    outcomes = {}
    for case in ET.parse(junit).iter("testcase"):
        outcome = "skipped" if case.find("skipped") is not None else "passed"
        outcomes[case.get("name")] = outcome
    device = fallback_backend.DEVICE_NAME
    assert outcomes == {
        "test_fill_cpu_float32": "passed",
        "test_fill_cpu_int64": "passed",
        "test_cpu_only_cpu": "passed",
        f"test_fill_{device}_float32": "passed",
        f"test_fill_{device}_int64": "passed",
        f"test_cpu_only_{device}": "skipped",
    }


def test_loading_after_the_test_machinery_is_refused(fallback_plugin_args: list[str]) -> None:
    script = "import torch.testing._internal.common_device_type\nimport fallback_backend\nfallback_backend.load()\n"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode != 0
    assert "BackendLoadError: torch.testing._internal.common_device_type was imported before" in run.stderr
