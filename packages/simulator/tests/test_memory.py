"""Device memory accounting and the capacity limit (OOM cases run in a subprocess with a tiny capacity)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from ringsim import runtime


def run_with_capacity(capacity: str, script: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RINGSIM_MEMORY_BYTES": capacity}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True, text=True, timeout=120
    )


def test_allocations_are_accounted_in_whole_sticks() -> None:
    gc.collect()
    before = torch.ring.memory_allocated()
    stats_before = runtime.memory_stats()
    tensor = torch.empty(100, dtype=torch.uint8, device="ring")
    assert torch.ring.memory_allocated() == before + 128
    assert runtime.memory_stats()["total_allocations"] == stats_before["total_allocations"] + 1
    del tensor
    assert torch.ring.memory_allocated() == before
    assert runtime.memory_stats()["total_frees"] == stats_before["total_frees"] + 1


def test_peak_tracks_the_high_water_mark_until_reset() -> None:
    torch.ring.reset_peak_memory_stats()
    base = torch.ring.memory_allocated()
    big = torch.empty(1 << 20, dtype=torch.uint8, device="ring")
    del big
    assert torch.ring.max_memory_allocated() == base + (1 << 20)
    torch.ring.reset_peak_memory_stats()
    assert torch.ring.max_memory_allocated() == torch.ring.memory_allocated() == base


def test_views_allocate_nothing() -> None:
    tensor = torch.empty(64, 64, device="ring")
    before = torch.ring.memory_allocated()
    views = [tensor.t(), tensor[::2], tensor.view(-1), tensor.unsqueeze(0)]
    assert torch.ring.memory_allocated() == before
    assert len(views) == 4


def test_mem_get_info_and_memory_stats_agree() -> None:
    tensor = torch.empty(1000, device="ring")
    free, total = torch.ring.mem_get_info()
    stats = torch.ring.memory_stats()
    assert total == stats["capacity_bytes"] == runtime.memory_stats()["capacity"]
    assert free == total - stats["allocated_bytes.all.current"]
    assert stats["allocated_bytes.all.current"] >= 4096
    assert stats["allocation.all.current"] >= 1
    del tensor


def test_default_capacity_is_16_gib_and_not_reserved_up_front() -> None:
    result = run_with_capacity(
        "",
        """
        import resource, torch
        torch.empty(1, device="ring")
        print(torch.ring.mem_get_info()[1], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        """,
    )
    assert result.returncode == 0, result.stderr
    capacity, max_rss_kib = map(int, result.stdout.split())
    assert capacity == 16 << 30
    assert max_rss_kib < 4 << 20


def test_exceeding_capacity_raises_out_of_memory_with_the_sizes() -> None:
    result = run_with_capacity(
        "4096",
        """
        import torch
        kept = torch.empty(3000, dtype=torch.uint8, device="ring")
        try:
            torch.empty(1100, dtype=torch.uint8, device="ring")
        except torch.OutOfMemoryError as error:
            print(error)
        del kept
        torch.empty(4096, dtype=torch.uint8, device="ring")
        print("recovered", torch.ring.memory_allocated(), torch.ring.max_memory_allocated())
        """,
    )
    assert result.returncode == 0, result.stderr
    message, recovered = result.stdout.strip().splitlines()
    assert "ring:0 out of memory: tried to allocate 1100 bytes (1152 in 128-byte sticks)" in message
    assert "3072 of 4096 bytes capacity allocated" in message
    assert recovered == "recovered 0 4096"


def test_out_of_memory_while_copying_to_the_device() -> None:
    result = run_with_capacity(
        "1024",
        """
        import torch
        try:
            torch.ones(512).to("ring")
        except torch.OutOfMemoryError as error:
            print(type(error).__name__, "2048 bytes" in str(error))
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["OutOfMemoryError", "True"]


def test_capacity_set_from_python_before_use() -> None:
    result = run_with_capacity(
        "",
        """
        import torch
        from ringsim import runtime
        runtime.set_memory_capacity(256)
        kept = torch.empty(64, device="ring")
        try:
            torch.empty(1, device="ring")
        except torch.OutOfMemoryError:
            print("oom", torch.ring.mem_get_info())
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "oom (0, 256)"


def test_capacity_cannot_drop_below_what_is_allocated() -> None:
    kept = torch.empty(1024, device="ring")
    with pytest.raises(ValueError, match=r"below the \d+ bytes already allocated"):
        runtime.set_memory_capacity(128)
    assert torch.ring.mem_get_info()[1] == 16 << 30
    del kept


@pytest.mark.parametrize("value", ["16GB", "-5", "99999999999999999999999"])
def test_malformed_capacity_variable_is_named_in_the_error(value: str) -> None:
    result = run_with_capacity(
        value,
        """
        import torch
        try:
            torch.empty(1, device="ring")
        except RuntimeError as error:
            print(error)
        """,
    )
    assert result.returncode == 0, result.stderr
    assert f"RINGSIM_MEMORY_BYTES must be a whole number of bytes, got '{value}'" in result.stdout
