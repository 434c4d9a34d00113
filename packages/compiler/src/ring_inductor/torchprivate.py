"""Every non-public torch (Inductor/dynamo) internal ring_inductor relies on, in one place.

Each name is resolved at import, so a torch upgrade that moves one fails here, naming the symbol and the torch
version, instead of deep inside a compile.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

import torch


def _resolve(module: str, name: str) -> Any:
    """`module`'s `name`, a dotted path under it (`aten._softmax` of `torch.ops`)."""
    try:
        return functools.reduce(getattr, name.split("."), importlib.import_module(module))
    except (ImportError, AttributeError) as missing:
        raise ImportError(
            f"ring_inductor needs {module}.{name}, which this torch ({torch.__version__}) lacks"
        ) from missing


#: (module, name) of every private symbol used; tests/test_torchprivate.py checks each one.
SYMBOLS: tuple[tuple[str, str], ...] = (
    ("torch._inductor.codegen.common", "register_backend_for_device"),
    ("torch._inductor.codegen.common", "register_device_op_overrides"),
    ("torch._inductor.codegen.common", "DeviceOpOverrides"),
    ("torch._inductor.codegen.common", "BackendFeature"),
    ("torch._inductor.codegen.wrapper", "PythonWrapperCodegen"),
    ("torch._inductor.scheduler", "BaseScheduling"),
    ("torch._inductor.scheduler", "SchedulerNode"),
    ("torch._inductor.virtualized", "V"),
    ("torch._inductor.decomposition", "decompositions"),
    ("torch._inductor.utils", "sympy_product"),
    ("torch.utils._ordered_set", "OrderedSet"),
    ("torch._dynamo.device_interface", "CpuInterface"),
    ("torch._dynamo.device_interface", "register_interface_for_device"),
    ("torch._inductor.lowering", "lowerings"),
    ("torch._inductor.lowering", "fallback_handler"),
    ("torch._inductor.ir", "TemplateBuffer"),
    ("torch._inductor.ir", "FixedLayout"),
    ("torch._inductor.ir", "TensorBox"),
    ("torch._inductor.ir", "ExternKernel"),
    ("torch.utils._pytree", "tree_leaves"),
    ("torch.ops", "aten._softmax"),
    ("torch.ops", "aten._log_softmax"),
    ("torch._inductor.custom_graph_pass", "CustomGraphModulePass"),
    ("torch.ops", "aten._unsafe_view"),
)

register_backend_for_device = _resolve(*SYMBOLS[0])
register_device_op_overrides = _resolve(*SYMBOLS[1])
DeviceOpOverrides = _resolve(*SYMBOLS[2])
BackendFeature = _resolve(*SYMBOLS[3])
PythonWrapperCodegen = _resolve(*SYMBOLS[4])
BaseScheduling = _resolve(*SYMBOLS[5])
SchedulerNode = _resolve(*SYMBOLS[6])
V = _resolve(*SYMBOLS[7])
#: Inductor's decomposition table (read by compile_fx at every compile), which the ring decompositions join.
inductor_decompositions: dict[Any, Any] = _resolve(*SYMBOLS[8])
sympy_product = _resolve(*SYMBOLS[9])
OrderedSet = _resolve(*SYMBOLS[10])
CpuInterface = _resolve(*SYMBOLS[11])
register_interface_for_device = _resolve(*SYMBOLS[12])
#: Inductor's lowering table (aten overload -> lowering), consulted at every compile.
inductor_lowerings: dict[Any, Any] = _resolve(*SYMBOLS[13])
_fallback_handler = _resolve(*SYMBOLS[14])
#: The IR node the scheduler offers epilogue fusion to (subclassed by `template.RingMatmulBuffer`).
TemplateBuffer = _resolve(*SYMBOLS[15])
FixedLayout = _resolve(*SYMBOLS[16])
TensorBox = _resolve(*SYMBOLS[17])
_ExternKernel = _resolve(*SYMBOLS[18])
#: Every tensor of a nest of lists, tuples and dicts (a call's args and kwargs).
tree_leaves = _resolve(*SYMBOLS[19])
#: aten's internal softmax packets, which the ring decompositions replace.
aten_softmax = _resolve(*SYMBOLS[20])
aten_log_softmax = _resolve(*SYMBOLS[21])
#: The base of the graph pass Inductor runs per device after its post-grad passes (`operand_sticks`).
CustomGraphModulePass = _resolve(*SYMBOLS[22])
#: The reshape aten's matmul decomposition ends a copied operand with.
aten_unsafe_view = _resolve(*SYMBOLS[23])


def realize_input(x: Any) -> Any:
    """A lowering's argument as a realized buffer or a strided view of one (what a template's inputs must be)."""
    return _ExternKernel.realize_input(x)


def eager_fallback_lowering(op: Any) -> Any:
    """A lowering that calls `op`'s eager kernel as an extern call (without making it a fallback everywhere)."""
    return _fallback_handler(op, add_to_fallback_set=False)


def register_composite_kernel(op: Any, kernel: Any) -> None:
    """Routes a CompositeImplicitAutograd op to `kernel` while tracing (the python dispatcher is on then).

    Such ops decompose before the decomposition table is consulted, so this is where their ring form goes. An op that
    already has such a kernel keeps it.
    """
    try:
        if op.py_kernels.get(torch._C.DispatchKey.CompositeImplicitAutograd) is not None:
            return  # registered by an earlier call
        op.py_impl(torch._C.DispatchKey.CompositeImplicitAutograd)(kernel)
    except AttributeError as missing:
        raise ImportError(
            f"ring_inductor needs OpOverload.py_impl, which this torch ({torch.__version__}) lacks"
        ) from missing


def no_compile_caches() -> Any:
    """A context (and decorator) compiling without Inductor's and AOTAutograd's on-disk caches.

    Their keys do not cover ring_inductor's own code, so a cached graph can predate a codegen change.
    """
    return torch._inductor.config.patch(force_disable_caches=True)


def drop_fused_buffers(stored: list[str], nodes: list[Any]) -> set[str]:
    """Of the buffers a fused group stores, those only the group reads: marked removed (never allocated) and returned.

    Their values stay in scratchpad tiles, so the kernel need not write them to device memory.
    """
    graph, scheduler = V.graph, V.graph.scheduler
    names = OrderedSet(n.get_name() for n in nodes)
    outputs = set(graph.get_output_names())
    dropped = {b for b in stored if b not in outputs and scheduler.can_buffer_be_removed_through_fusion(b, names)}
    graph.removed_buffers |= dropped
    return dropped


def wrapper_name(buffer: str) -> str:
    """The wrapper variable holding `buffer` (a mutated buffer is written through its original's name)."""
    return V.graph.scheduler.mutation_real_name.get(buffer, buffer)


def node_loop_body(node: Any) -> tuple[Any, tuple[list[Any], list[Any]]]:
    """A scheduler node's loop body and its (pointwise, reduction) iteration sizes."""
    try:
        return node._body, node._sizes
    except AttributeError as missing:
        raise ImportError(
            f"ring_inductor needs SchedulerNode._body/_sizes, which this torch ({torch.__version__}) lacks"
        ) from missing
