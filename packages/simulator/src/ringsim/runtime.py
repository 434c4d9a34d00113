"""What compute kernels use to reach ring device memory and the device's random state.

Device memory is host memory behind the ring allocator. Kernels never dereference a ring tensor's
data_ptr themselves: they take `host_view(t)`, a CPU tensor aliasing exactly `t`'s elements, compute
on CPU tensors, and write results through another host view. That keeps every host access to device
memory behind one audited function, as a driver's DMA API would.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ringsim import _C

STICK_BYTES: int = _C.STICK_BYTES


# Bound straight to the extension: these run on every kernel launch, and a Python wrapper would add
# about a third to their cost. The extension's docstrings state the contract.
host_view: Callable[[torch.Tensor], torch.Tensor] = _C.host_view
storage_host_view: Callable[[torch.Tensor], torch.Tensor] = _C.storage_host_view


def device_address(tensor: torch.Tensor) -> int:
    """The device address of `tensor`'s first element (what a DMA descriptor would carry)."""
    return tensor.data_ptr()


def cpu_generator(index: int = 0) -> torch.Generator:
    """The CPU generator holding ring:`index`'s default random state.

    Sampling kernels draw from it, so torch.manual_seed / torch.ring.manual_seed make them reproducible.
    """
    return _C.host_generator(_C.default_generator(index))


def host_generator(generator: torch.Generator) -> torch.Generator:
    """The CPU generator holding the state of a ring generator (e.g. torch.Generator(device="ring"))."""
    return _C.host_generator(generator)


def set_memory_capacity(nbytes: int, device: int = 0) -> None:
    """Sets how many bytes ring:`device` may hold; refuses a capacity below what is allocated now."""
    _C.set_memory_capacity(device, nbytes)


def memory_stats(device: int = 0) -> dict[str, int]:
    """Capacity, allocated and peak bytes (in whole sticks) and allocation counts of ring:`device`."""
    return _C.memory_stats(device)
