"""The planner's cost model: cycle estimates for DMA, compute, ring transfers and barriers.

Every figure comes from the simulator's public `ringsim.engine.DeviceModel`, so the planner and the simulator
cannot drift apart; the passes compare candidates with these estimates and the simulator measures the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringsim.engine import DEFAULT_MODEL, DeviceModel


@dataclass(frozen=True, slots=True)
class CostModel:
    device: DeviceModel = DEFAULT_MODEL

    @property
    def cores(self) -> int:
        return self.device.cores

    @property
    def stick(self) -> int:
        return self.device.stick_bytes

    @property
    def scratchpad(self) -> int:
        return self.device.usable_scratchpad_bytes

    @property
    def span(self) -> int:
        return self.device.addressable_span_bytes

    def stick_bytes(self, nbytes: int) -> int:
        """Bytes a transfer really occupies: whole sticks."""
        return self.device.sticks(nbytes) * self.stick

    def dma(self, nbytes: int, concurrent: int = 1, mixed: bool = False) -> float:
        """One DMA of `nbytes` while `concurrent` cores share device memory (reads and writes mixed or one way)."""
        share = (self.device.memory_mixed_bytes_per_cycle if mixed else self.device.memory_peak_bytes_per_cycle) / max(
            concurrent, 1
        )
        rate = min(self.device.dma_engine_bytes_per_cycle, share)
        return self.device.dma_latency_cycles + self.stick_bytes(nbytes) / rate

    def memory(self, nbytes: int, mixed: bool = True) -> float:
        """Cycles for the whole device to move `nbytes` through shared device memory (bandwidth only)."""
        rate = self.device.memory_mixed_bytes_per_cycle if mixed else self.device.memory_peak_bytes_per_cycle
        return nbytes / rate

    def vector(self, elements: int) -> float:
        return self.device.compute_issue_cycles + elements / self.device.vector_elements_per_cycle

    def reduce(self, elements: int) -> float:
        return self.device.compute_issue_cycles + elements / self.device.reduction_elements_per_cycle

    def matmul(self, macs: int) -> float:
        return self.device.compute_issue_cycles + macs / self.device.macs_per_cycle

    def ring(self, nbytes: int, hops: int = 1) -> float:
        """A tile passed `hops` neighbours along the ring, one link at a time."""
        per_hop = self.device.ring_hop_latency_cycles + nbytes / self.device.ring_link_bytes_per_cycle
        return hops * (per_hop + self.device.ring_recv_cycles)

    @property
    def barrier(self) -> float:
        return self.device.barrier_cycles

    def round_trip(self, nbytes: int, concurrent: int = 1) -> float:
        """Spilling a tile: written to device memory, a barrier, read back (each core its share of bandwidth)."""
        return self.dma(nbytes, concurrent) + self.barrier + self.dma(nbytes, concurrent)

    def roofline(self, flops: int, nbytes: int) -> float:
        """The whole-device bound: FLOPs at peak compute or bytes at peak one-way bandwidth, whichever is larger."""
        return max(flops / self.device.peak_flops_per_cycle, nbytes / self.device.memory_peak_bytes_per_cycle)


DEFAULT_COST = CostModel()
