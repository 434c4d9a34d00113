"""Decompositions of composite ops into the device's primitives, applied to ring tensors only."""

from __future__ import annotations


def install() -> None:
    """Placeholder until the ring decompositions land."""
