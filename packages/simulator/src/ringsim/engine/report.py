"""What one kernel launch cost: the figures `ringsim.stats()`, the profiler and `ringsim run` report."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from .model import DeviceModel
from .timing import CoreBusy


@dataclass(frozen=True, slots=True)
class KernelReport:
    """Cycles by activity (activities overlap; each is wall-clock cycles in which some core did it), data moved,
    and the roofline bound. A pure function of the program, so every launch of one program shares one report."""

    name: str
    total_cycles: float
    compute_cycles: float
    memory_cycles: float
    communication_cycles: float
    per_core: Mapping[int, CoreBusy]
    bytes_read: int
    bytes_written: int
    ring_bytes: int
    sticks: int
    flops: int
    roofline_cycles: float
    model: DeviceModel

    @property
    def bytes_moved(self) -> int:
        """Device-memory bytes moved by DMA, both directions."""
        return self.bytes_read + self.bytes_written

    @property
    def microseconds(self) -> float:
        return self.total_cycles / self.model.clock_hz * 1e6

    @property
    def achieved_bandwidth_gbps(self) -> float:
        """Device-memory bytes moved per second of kernel time, in GB/s."""
        return self.bytes_moved / self.total_cycles * self.model.clock_hz / 1e9 if self.total_cycles else 0.0

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per device-memory byte; compare with the model's ridge point."""
        return self.flops / self.bytes_moved if self.bytes_moved else float("inf") if self.flops else 0.0

    @property
    def bound(self) -> str:
        """Which roof limits the kernel: 'memory' below the ridge point, 'compute' above it."""
        return "compute" if self.arithmetic_intensity >= self.model.ridge_flops_per_byte else "memory"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready, deterministic view (integer cycles, sorted cores)."""
        return {
            "name": self.name,
            "cycles": {
                "total": round(self.total_cycles),
                "compute": round(self.compute_cycles),
                "memory": round(self.memory_cycles),
                "communication": round(self.communication_cycles),
                "roofline_bound": round(self.roofline_cycles),
            },
            "microseconds": round(self.microseconds, 3),
            "bytes": {"read": self.bytes_read, "written": self.bytes_written, "ring": self.ring_bytes},
            "sticks": self.sticks,
            "flops": self.flops,
            "bound": self.bound,
            "achieved_bandwidth_gbps": round(self.achieved_bandwidth_gbps, 3),
            "model": asdict(self.model),
            "cores": {
                str(core): {
                    "compute": round(busy.compute),
                    "memory": round(busy.memory),
                    "communication": round(busy.communication),
                    "busy": round(busy.busy),
                    "idle": round(busy.idle),
                }
                for core, busy in sorted(self.per_core.items())
            },
        }
