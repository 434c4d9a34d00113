"""Registers ring_inductor with Inductor: scheduling, wrapper codegen, device ops and the ring decompositions."""

from __future__ import annotations

import functools

import ringsim  # noqa: F401 - makes the `ring` device exist

from ring_inductor import decompositions, fallbacks
from ring_inductor.operand_sticks import OperandSticksPass
from ring_inductor.scheduling import RingScheduling
from ring_inductor.torchprivate import (
    register_backend_for_device,
    register_device_op_overrides,
    register_interface_for_device,
)
from ring_inductor.wrapper import RingDeviceOpOverrides, RingInterface, RingWrapperCodegen

DEVICE = "ring"


@functools.cache
def register() -> None:
    """Makes torch.compile(model) on ring tensors compile through ring_inductor (idempotent)."""
    register_backend_for_device(DEVICE, RingScheduling, RingWrapperCodegen, device_custom_pass=OperandSticksPass())
    register_device_op_overrides(DEVICE, RingDeviceOpOverrides())
    register_interface_for_device(DEVICE, RingInterface)
    decompositions.install()
    fallbacks.install()
