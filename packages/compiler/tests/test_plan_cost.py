"""The cost model follows the simulator's DeviceModel, whatever its figures."""

from __future__ import annotations

import dataclasses

from ring_inductor.plan.cost import CostModel
from ringsim.engine import DEFAULT_MODEL


def test_figures_come_from_the_device_model():
    cost = CostModel()
    assert cost.cores == DEFAULT_MODEL.cores
    assert cost.scratchpad == DEFAULT_MODEL.usable_scratchpad_bytes
    assert cost.span == DEFAULT_MODEL.addressable_span_bytes
    doubled = CostModel(dataclasses.replace(DEFAULT_MODEL, macs_per_cycle=2 * DEFAULT_MODEL.macs_per_cycle))
    macs = 10**6
    issue = DEFAULT_MODEL.compute_issue_cycles
    assert doubled.matmul(macs) - issue == (cost.matmul(macs) - issue) / 2


def test_partial_sticks_cost_whole_ones_and_sharing_slows_each_dma():
    cost = CostModel()
    assert cost.stick_bytes(1) == DEFAULT_MODEL.stick_bytes
    assert cost.dma(100) == cost.dma(128)
    assert cost.dma(1 << 20, concurrent=32) > cost.dma(1 << 20)


def test_a_one_hop_shuffle_is_cheaper_than_a_round_trip_through_memory():
    cost = CostModel()
    assert cost.ring(64 * 1024) < cost.round_trip(64 * 1024, concurrent=32)
    assert cost.roofline(0, 150) == 150 / DEFAULT_MODEL.memory_peak_bytes_per_cycle
