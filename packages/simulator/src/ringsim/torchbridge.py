"""The private torch APIs the simulator relies on, in one place, each failing loudly when a torch upgrade moves it."""

from __future__ import annotations

from typing import Any

import torch

try:
    _resolve_packet = torch._C._jit_resolve_packet
except AttributeError as missing:  # pragma: no cover - only on a torch that moved it
    raise ImportError(
        f"ringsim needs torch._C._jit_resolve_packet, which this torch ({torch.__version__}) lacks"
    ) from missing


def resolve_overload(qualname: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The overload an OpOverloadPacket call picks for these arguments (`aten::sum` -> `dim_IntList`); `` is default."""
    return _resolve_packet(qualname, *args, **kwargs)
