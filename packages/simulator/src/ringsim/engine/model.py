"""The pinned parameters of the Ring-32 performance model, each with its source.

Figures from the public description of the reference device are marked `spec`; `fitted` ones come from the
analytical cost model fitted to measured kernels (same description); `assumed` ones are ours, chosen to be
plausible and kept fixed so that before/after comparisons change one thing at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class DeviceModel:
    """Every figure the engine checks programs against and charges cycles with."""

    #: assumed: 1 GHz, so the fitted 1,140 MAC/ns is 1,140 MAC per cycle and GB/s are bytes per cycle.
    clock_hz: float = 1.0e9
    #: spec: 32 cores on a ring.
    cores: int = 32
    #: spec: memory is addressed in 128-byte sticks (64 fp16 elements).
    stick_bytes: int = 128
    #: spec: 2 MiB scratchpad per core, of which about 1.55 MiB is usable (64 KiB reserved, the rest runtime use);
    #: rounded down to whole sticks.
    scratchpad_bytes: int = 2 * MIB
    usable_scratchpad_bytes: int = (int(1.55 * MIB) // 128) * 128
    #: spec: about 256 MB of device memory addressable per core.
    addressable_span_bytes: int = 256 * MIB
    #: fitted: about 1,140 MAC/ns per core (2 corelets, each an 8x8 systolic array).
    macs_per_cycle: float = 1140.0
    #: assumed: each corelet's vector unit handles one 64-element fp16 stick per cycle, so 128 elements per core.
    vector_elements_per_cycle: float = 128.0
    #: assumed: a reduction consumes its input at the same stick per corelet per cycle (a tree behind the lanes).
    reduction_elements_per_cycle: float = 128.0
    #: assumed: fixed cost to issue one compute instruction (operand setup, pipeline fill).
    compute_issue_cycles: float = 16.0
    #: spec: about 150 GB/s peak device-memory bandwidth in one direction, shared by all cores.
    memory_peak_bytes_per_cycle: float = 150.0
    #: fitted: about 105 GB/s when reads and writes are mixed evenly.
    memory_mixed_bytes_per_cycle: float = 105.0
    #: assumed: each core has one DMA engine per direction moving at most one stick per cycle.
    dma_engine_bytes_per_cycle: float = 128.0
    #: assumed: fixed latency of one DMA transfer (LPDDR5 access plus descriptor setup).
    dma_latency_cycles: float = 200.0
    #: assumed: each ring link moves 64 bytes per cycle in each direction.
    ring_link_bytes_per_cycle: float = 64.0
    #: assumed: latency of one hop between neighbouring cores.
    ring_hop_latency_cycles: float = 32.0
    #: assumed: cost of landing a received tile in the scratchpad.
    ring_recv_cycles: float = 8.0
    #: assumed: one trip round the ring (32 hops at 2 cycles) to release a barrier.
    barrier_cycles: float = 64.0

    @property
    def peak_flops_per_cycle(self) -> float:
        """Whole-device compute peak: 2 FLOPs per MAC on every core (~73 TFLOP/s at 1 GHz)."""
        return 2.0 * self.macs_per_cycle * self.cores

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity above which a kernel is compute-bound (~486 FLOP/byte)."""
        return self.peak_flops_per_cycle / self.memory_peak_bytes_per_cycle

    def sticks(self, nbytes: int) -> int:
        """Sticks a transfer of `nbytes` occupies: a partial stick costs a whole one."""
        return -(-nbytes // self.stick_bytes)

    def memory_capacity(self, reads: int, writes: int) -> float:
        """Shared device-memory bandwidth with `reads` and `writes` transfers in flight.

        Linear in the minority share: peak when all transfers go one way, the mixed figure at an even mix.
        """
        total = reads + writes
        if total == 0:
            return self.memory_peak_bytes_per_cycle
        mix = 2.0 * min(reads, writes) / total
        return (
            self.memory_peak_bytes_per_cycle
            - (self.memory_peak_bytes_per_cycle - self.memory_mixed_bytes_per_cycle) * mix
        )


#: The parameters every kernel is charged with unless a caller pins others.
DEFAULT_MODEL = DeviceModel()
