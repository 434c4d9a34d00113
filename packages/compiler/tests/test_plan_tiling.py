"""Tiling: blocks fit the scratchpad and divide the work exactly."""

from __future__ import annotations

import pytest
from ring_inductor.plan.tiling import TilingError, matmul_tile, row_block

CAPACITY = 1_625_216


def test_row_blocks_divide_the_rows_fit_and_leave_a_pipeline():
    def fits(block: int) -> bool:
        return 2 * block * (2048 + 4) <= CAPACITY

    block = row_block(512, fits, grain=64, depth=4)
    assert block == 128
    assert row_block(512, fits, grain=64) == 256
    assert row_block(512, fits, grain=64, depth=64) == 256  # no block leaves 64: the largest that fits


def test_a_row_larger_than_the_scratchpad_is_refused():
    with pytest.raises(TilingError, match="no block of 4 rows"):
        row_block(4, lambda block: False)


def test_matmul_tile_balances_the_accumulator_and_fits():
    tile = matmul_tile(2048, 512, 32768, CAPACITY, 128)
    assert tile.footprint(128) <= CAPACITY
    assert 2048 % tile.m == 0
    assert 512 % tile.n == 0
    assert 32768 % tile.k == 0
    assert tile.k % 64 == 0
    # 512 x 512 would need 1.5 MiB for the accumulator and output tile alone
    assert (tile.m, tile.n) == (256, 512)


def test_no_tile_fits_a_tiny_scratchpad():
    with pytest.raises(TilingError):
        matmul_tile(128, 128, 128, 1024, 128)


@pytest.mark.parametrize(("m", "n", "itemsize"), [(2, 512, 2), (4, 8, 2), (2, 16, 4)])
def test_every_matmul_dma_is_whole_sticks(m: int, n: int, itemsize: int):
    """A 2-row block with 16 columns would store 64 bytes: a DMA off the stick boundary the engine refuses."""
    try:
        tile = matmul_tile(m, n, 2048, CAPACITY, 128, itemsize)
    except TilingError:
        return  # no aligned tile at all: the division pass then weighs other splits
    assert tile.whole_sticks(128)
    for elements in (tile.m * tile.k, tile.k * tile.n, tile.m * tile.n):
        assert elements * itemsize % 128 == 0, tile
