"""torch.ring, the generated tensor/storage methods, and the device's random generator."""

from __future__ import annotations

import pytest
import torch
from ringsim import runtime


def test_torch_finds_the_device_module() -> None:
    assert torch.get_device_module("ring") is torch.ring
    assert torch._C._get_privateuse1_backend_name() == "ring"


def test_one_available_device() -> None:
    assert torch.ring.is_available()
    assert torch.ring.is_initialized()
    assert not torch.ring._is_in_bad_fork()
    assert torch.ring.device_count() == 1
    assert torch.ring.current_device() == 0


def test_set_device_accepts_indices_names_and_devices() -> None:
    for spec in (0, "ring", "ring:0", torch.device("ring", 0)):
        torch.ring.set_device(spec)
        assert torch.ring.current_device() == 0


def test_missing_devices_are_refused() -> None:
    with pytest.raises(IndexError, match="ring device index 1 out of range"):
        torch.ring.set_device(1)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.empty(1, device="ring:1")
    with pytest.raises(ValueError, match="expected a ring device"):
        torch.ring.set_device("cpu")


def test_device_context_manager_restores_the_current_device() -> None:
    with torch.ring.device(0):
        assert torch.ring.current_device() == 0
    assert torch.ring.current_device() == 0


def test_synchronize_returns() -> None:
    torch.ring.synchronize()
    torch.ring.synchronize("ring:0")


def test_generated_methods() -> None:
    tensor = torch.ones(3).ring()
    assert tensor.is_ring
    assert tensor.device == torch.device("ring:0")
    assert not torch.ones(1).is_ring
    storage = torch.ones(2).untyped_storage().ring()
    assert storage.is_ring
    assert storage.device.type == "ring"
    module = torch.nn.Linear(2, 3).ring()
    assert module.weight.is_ring
    assert module.bias.device.type == "ring"


def test_autocast_dtypes_are_the_reduced_precision_ones() -> None:
    assert torch.ring.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]


def draw(generator: torch.Generator) -> torch.Tensor:
    return torch.rand(8, generator=generator)


def test_torch_manual_seed_reaches_the_device_generator() -> None:
    torch.manual_seed(1234)
    first = draw(runtime.cpu_generator())
    torch.manual_seed(1234)
    assert torch.equal(draw(runtime.cpu_generator()), first)
    assert torch.ring.initial_seed() == 1234


def test_ring_manual_seed_leaves_the_cpu_generator_alone() -> None:
    torch.manual_seed(7)
    torch.ring.manual_seed(99)
    assert torch.initial_seed() == 7
    assert torch.ring.initial_seed() == 99
    torch.ring.manual_seed_all(5)
    assert torch.ring.initial_seed() == 5


def test_rng_state_round_trips() -> None:
    torch.ring.manual_seed(3)
    state = torch.ring.get_rng_state()
    assert state.dtype == torch.uint8
    assert state.device.type == "cpu"
    first = draw(runtime.cpu_generator())
    torch.ring.set_rng_state(state)
    assert torch.equal(draw(runtime.cpu_generator()), first)
    torch.ring.set_rng_state_all(torch.ring.get_rng_state_all())


def test_seed_picks_a_fresh_seed() -> None:
    torch.ring.manual_seed(0)
    torch.ring.seed()
    torch.ring.seed_all()
    assert torch.ring.initial_seed() != 0


def test_fork_rng_saves_and_restores_the_device_state() -> None:
    torch.ring.manual_seed(11)
    with torch.random.fork_rng(device_type="ring"):
        torch.ring.manual_seed(12)
    first = draw(runtime.cpu_generator())
    torch.ring.manual_seed(11)
    assert torch.equal(draw(runtime.cpu_generator()), first)


def test_explicit_ring_generators_hold_state_on_a_cpu_generator() -> None:
    generator = torch.Generator(device="ring")
    assert generator.device == torch.device("ring", 0)
    generator.manual_seed(42)
    host = runtime.host_generator(generator)
    assert host.device.type == "cpu"
    assert host.initial_seed() == 42
    first = draw(host)
    generator.manual_seed(42)
    assert torch.equal(draw(runtime.host_generator(generator)), first)
    with pytest.raises(RuntimeError, match="expected a ring generator"):
        runtime.host_generator(torch.Generator())


def test_torch_accelerator_api_sees_ring() -> None:
    assert torch.accelerator.current_accelerator() == torch.device("ring")
    assert torch.accelerator.device_count() == 1
    torch.accelerator.set_device_index(0)
    assert torch.accelerator.current_device_index() == 0
    torch.accelerator.synchronize()
