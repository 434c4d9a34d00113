"""The one error ring_inductor raises for what the device cannot compile, with a one-line message."""

from __future__ import annotations


class UnsupportedError(NotImplementedError):
    """A graph piece the ring codegen cannot express; the message names the op and dtype."""
