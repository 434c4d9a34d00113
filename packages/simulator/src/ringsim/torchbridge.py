"""The private torch APIs the simulator relies on, in one place, each failing loudly when a torch upgrade moves it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

try:
    _resolve_packet = torch._C._jit_resolve_packet
    _eval_frame = torch._C._dynamo.eval_frame
    _SKIP_ALL = _eval_frame._FrameExecStrategy(_eval_frame._FrameAction.SKIP, _eval_frame._FrameAction.SKIP)
    _set_code_exec_strategy = _eval_frame.set_code_exec_strategy
    _registrations_for_key = torch._C._dispatch_get_registrations_for_dispatch_key
except AttributeError as missing:  # pragma: no cover - only on a torch that moved it
    raise ImportError(f"ringsim needs a torch._C API this torch ({torch.__version__}) lacks: {missing}") from missing


def resolve_overload(qualname: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The overload an OpOverloadPacket call picks for these arguments (`aten::sum` -> `dim_IntList`); `` is default."""
    return _resolve_packet(qualname, *args, **kwargs)


def privateuse1_registrations() -> list[str]:
    """Every operator with a kernel of its own for PrivateUse1 (`aten::view`, `aten::add.Tensor`), as the
    dispatcher holds them: what the device registered, in C++ or Python."""
    return sorted(_registrations_for_key("PrivateUse1"))


def never_traced(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a kernel as the device's runtime: dynamo's frame hook skips it and every frame it calls. Without this,
    an eager ring op run inside a torch.compile'd region (between graphs) would have its Python kernel traced as if
    it were user code. Done in C, so dynamo is not imported for it."""
    _set_code_exec_strategy(fn.__code__, _SKIP_ALL)
    return fn
