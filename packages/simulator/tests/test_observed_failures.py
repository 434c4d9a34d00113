"""Regressions from the upstream observation run: device bugs that upstream test files found. CPU eager is the
reference."""

from __future__ import annotations

import warnings

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


# --- a byte mask index warns once per call, at the caller's line, as on CPU ------------------------------------------


def _byte_mask_warnings(device: str) -> list[str]:
    v = torch.ones(3, device=device)
    mask = torch.tensor([1, 0, 1], dtype=torch.uint8, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        v[mask]
        v[mask]
    # CPU's text ends with where in aten it was raised: "(Triggered internally at ...)"
    return [f"{w.filename}:{w.lineno}: {str(w.message).partition(' (Triggered')[0]}" for w in caught]


def test_byte_mask_indexing_warns_like_cpu() -> None:
    assert _byte_mask_warnings(DEVICE) == _byte_mask_warnings("cpu")
