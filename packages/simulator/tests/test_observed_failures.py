"""Regressions from the upstream observation run: device bugs that upstream test files found. CPU eager is the
reference."""

from __future__ import annotations

import pytest
import torch
from ringsim.engine import compute

DEVICE = "ring"


# --- the shared zero buffer that shapes are inferred on holds whole items of every dtype -----------------------------


def test_cat_after_an_odd_sized_bool_cat_matches_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compute, "_ZEROS", torch.zeros(0, dtype=torch.uint8))
    flags = torch.ones(7, dtype=torch.bool)
    torch.cat([flags.to(DEVICE), flags.to(DEVICE)])  # grows the zero buffer to 14 bytes
    x = torch.randn(1)
    torch.testing.assert_close(torch.stack([x.to(DEVICE), x.to(DEVICE)]).cpu(), torch.stack([x, x]))
