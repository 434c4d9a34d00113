"""What compute kernels use to reach ring device memory and the device's random state.

Device memory is host memory behind the ring allocator. Kernels never dereference a ring tensor's
data_ptr themselves: they take `host_view(t)`, a CPU tensor aliasing exactly `t`'s elements, compute
on CPU tensors, and write results through another host view. That keeps every host access to device
memory behind one audited function, as a driver's DMA API would.
"""

from __future__ import annotations

import torch

from ringsim import _C

STICK_BYTES: int = _C.STICK_BYTES


def host_view(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU tensor over `tensor`'s device memory: same sizes, strides, storage offset and dtype.

    Writes through it land in the device tensor. It keeps the device storage alive; it does not follow
    a later resize_ of that storage, so take it right before use.
    """
    return _C.host_view(tensor)


def storage_host_view(tensor: torch.Tensor) -> torch.Tensor:
    """A flat uint8 CPU tensor over the whole untyped storage behind `tensor`."""
    return _C.storage_host_view(tensor)


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
