"""What ring kernels cannot express runs on the device's eager kernels, or fails with one clear line."""

from __future__ import annotations

import pytest
import torch
from ring_inductor.checking import compiled_kernels, compiled_run, float64_reference
from ring_inductor.tolerance import device_bound, excess


def test_inductor_fallback_op_runs_eagerly_between_ring_kernels() -> None:
    x = torch.randn(64, 96, dtype=torch.float32)
    fn = lambda x: torch.sort(x * 2, dim=-1).values + 1  # noqa: E731
    out, kernels = compiled_run(fn, x)
    assert out.device.type == "ring"
    assert any(name.startswith("sort") for name in kernels), kernels
    assert compiled_kernels(kernels), kernels
    assert excess(out, float64_reference(fn, x), device_bound(torch.float32, "rounded", scale=8)) <= 0


def test_indirect_indexing_falls_back_to_the_eager_gather() -> None:
    x = torch.randn(32, 64, dtype=torch.float16)
    index = torch.randint(0, 64, (32, 8))
    fn = lambda x, i: torch.gather(x * 2, 1, i) + 1  # noqa: E731
    torch.compiler.reset()
    out, kernels = compiled_run(lambda x: fn(x, index.to("ring")), x)
    assert compiled_kernels(kernels), kernels
    expected = fn(x.double(), index)
    assert excess(out, expected, device_bound(torch.float16, "rounded", scale=8)) <= 0


def test_float64_arithmetic_fails_with_one_line_naming_op_and_dtype() -> None:
    x = torch.randn(16, 32, dtype=torch.float32)
    with pytest.raises(Exception, match="ring_inductor cannot compile") as caught:
        compiled_run(lambda x: x.double() * 3, x)
    first = str(caught.value).splitlines()[0]
    assert "aten.mul.Tensor (float64)" in first
    assert "float64" in first.split(": ")[-1]


def test_cpu_compiles_are_unaffected() -> None:
    x, index = torch.randn(8, 32), torch.randint(0, 32, (8, 32))
    fn = lambda x: torch.softmax(x, -1) + torch.gather(x, 1, index)  # noqa: E731
    torch.compiler.reset()
    out = torch.compile(fn)(x)
    assert out.device.type == "cpu"
    torch.testing.assert_close(out, fn(x))
