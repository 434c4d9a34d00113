"""The private torch APIs the simulator relies on, in one place, each failing loudly when a torch upgrade moves it.

Each is resolved at import (torch's OpInfo table on first use: importing it takes seconds), so a moved one fails
here, naming the symbol and the torch version, instead of deep inside a kernel.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch


def _resolve(module: str, name: str) -> Any:
    """`module.name`, or an ImportError naming it and the torch version when an upgrade moved it."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as missing:
        raise ImportError(f"ringsim needs {module}.{name}, which this torch ({torch.__version__}) lacks") from missing


#: (module, name) of every private symbol used; tests/test_torchbridge.py checks each one.
SYMBOLS: tuple[tuple[str, str], ...] = (
    ("torch._ops", "OpOverload"),
    ("torch._C", "_jit_resolve_packet"),
    ("torch._C", "_dispatch_get_registrations_for_dispatch_key"),
    ("torch._C._dynamo.eval_frame", "_FrameExecStrategy"),
    ("torch._C._dynamo.eval_frame", "_FrameAction"),
    ("torch._C._dynamo.eval_frame", "set_code_exec_strategy"),
    ("torch._C", "_get_privateuse1_backend_name"),
    ("torch", "_register_device_module"),
    ("torch._C", "_VariableFunctions"),
    ("torch", "_debug_has_internal_overlap"),
    ("torch.testing._internal.common_methods_invocations", "op_db"),
)
#: The private attributes read from every OpOverload (schema(), overload_name()); checked at import on
#: aten::add.Tensor, and by tests/test_torchbridge.py.
OVERLOAD_ATTRIBUTES: tuple[str, ...] = ("_schema", "_overloadname")

#: An aten overload (`aten::add.Tensor`): what the device registers kernels for and calls with.
OpOverload = _resolve(*SYMBOLS[0])
_resolve_packet = _resolve(*SYMBOLS[1])
_registrations_for_key = _resolve(*SYMBOLS[2])
_FrameExecStrategy = _resolve(*SYMBOLS[3])
_FrameAction = _resolve(*SYMBOLS[4])
_set_code_exec_strategy = _resolve(*SYMBOLS[5])
_privateuse1_backend_name = _resolve(*SYMBOLS[6])
_register_device_module = _resolve(*SYMBOLS[7])
_bound_functions = _resolve(*SYMBOLS[8])
_internal_overlap = _resolve(*SYMBOLS[9])

try:
    _SKIP_ALL = _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP)
    for _attribute in OVERLOAD_ATTRIBUTES:
        getattr(torch.ops.aten.add.Tensor, _attribute)
except AttributeError as missing:  # pragma: no cover - only on a torch that moved it
    raise ImportError(f"ringsim needs a torch API this torch ({torch.__version__}) lacks: {missing}") from missing


def schema(op: OpOverload) -> torch.FunctionSchema:
    """`op`'s schema (name, arguments, returns), which torch keeps private on the overload."""
    return op._schema


def overload_name(op: OpOverload) -> str:
    """`op`'s overload name (`Tensor` for `aten::add.Tensor`, `default` for `aten::abs`)."""
    return op._overloadname


def qualname(op: OpOverload) -> str:
    """`op` as the registry and the errors name it: `add.Tensor`, or `abs` for a default overload."""
    name, overload = schema(op).name.removeprefix("aten::"), overload_name(op)
    return name if overload == "default" else f"{name}.{overload}"


def resolve_overload(packet: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The overload an OpOverloadPacket call picks for these arguments (`aten::sum` -> `dim_IntList`); `` is default."""
    return _resolve_packet(packet, *args, **kwargs)


def bound_function(name: str) -> Callable[..., Any] | None:
    """torch's C++-bound function `name` (`torch.add` for `add`), if any: it resolves the overload an OpOverloadPacket
    would, at a fraction of an OpOverload call's cost."""
    return getattr(_bound_functions, name, None)


def internal_overlap(t: torch.Tensor) -> int:
    """Whether elements of `t` share memory, as torch's in-place checks see it: 0 no, 1 surely (a 0 stride), 2 maybe.
    torch exposes that check only as a debug helper."""
    return _internal_overlap(t)


def privateuse1_registrations() -> list[str]:
    """Every operator with a kernel of its own for PrivateUse1 (`aten::view`, `aten::add.Tensor`), as the
    dispatcher holds them: what the device registered, in C++ or Python."""
    return sorted(_registrations_for_key("PrivateUse1"))


def privateuse1_backend_name() -> str:
    """The name the privateuse1 device goes by (`privateuse1` until renamed); torch has no public getter."""
    return _privateuse1_backend_name()


def register_device_module(name: str, module: ModuleType) -> None:
    """Install `module` as `torch.<name>` (`torch.ring`), where torch looks a device's module up, as cuda's is."""
    _register_device_module(name, module)


def opinfo_db() -> list[Any]:
    """torch's OpInfo table (`op_db`): the sample inputs the conformance cases run. Imported on first use."""
    return _resolve(*SYMBOLS[10])


def never_traced(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a kernel as the device's runtime: dynamo's frame hook skips it and every frame it calls. Without this,
    an eager ring op run inside a torch.compile'd region (between graphs) would have its Python kernel traced as if
    it were user code. Done in C, so dynamo is not imported for it."""
    _set_code_exec_strategy(fn.__code__, _SKIP_ALL)
    return fn
