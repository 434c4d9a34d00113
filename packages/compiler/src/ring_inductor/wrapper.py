"""The Python wrapper codegen for `ring`: Inductor's, plus the import the generated kernels need."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from ring_inductor.torchprivate import CpuInterface, DeviceOpOverrides, PythonWrapperCodegen


class RingWrapperCodegen(PythonWrapperCodegen):
    """Inductor's Python wrapper; kernel definitions are `RingKernel` objects built in the module header."""

    @staticmethod
    def create(is_subgraph: bool, subgraph_name: Any, parent_wrapper: Any, partition_signatures: Any = None) -> Any:
        if is_subgraph:
            return PythonWrapperCodegen.create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures)
        return RingWrapperCodegen()

    def write_header(self) -> None:
        super().write_header()
        self.imports.writeline("from ring_inductor.kernel import RingKernel")


class RingDeviceOpOverrides(DeviceOpOverrides):
    """The device statements the wrapper writes around ring kernels (the simulator runs them synchronously)."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return f"def {name}(index): return None"

    def set_device(self, device_idx: int) -> str:
        return f"torch.ring.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.ring.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.ring.device({device_idx})"


class RingInterface(CpuInterface):
    """What dynamo and Inductor ask of the device: synchronous, always available, 32 cores, no Triton."""

    class Worker:
        @staticmethod
        def get_device_properties(device: Any = None) -> Any:
            return SimpleNamespace(multi_processor_count=32)

    @staticmethod
    def current_device() -> int:
        return torch.ring.current_device()

    @staticmethod
    def device_count() -> int:
        return torch.ring.device_count()

    @staticmethod
    def is_triton_capable(device: Any = None) -> bool:
        return False
