"""Inductor's Scheduling for device `ring`: which nodes fuse, and each fused group's codegen to one ring program."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ring_inductor import config, dump, fusion, fusion_planned
from ring_inductor.emit import RowOverflow, Tiles, build_program, plan_split
from ring_inductor.emit_looped import build_looped, fits_looped
from ring_inductor.errors import UnsupportedError
from ring_inductor.recorder import record_kernel
from ring_inductor.torchprivate import (
    BackendFeature,
    BaseScheduling,
    OrderedSet,
    V,
    drop_fused_buffers,
    sympy_product,
    wrapper_name,
)


def _fits(nodes: list[Any]) -> bool:
    """Whether one kernel can hold `nodes`, as the configured scratchpad solver places its tiles (the one the
    kernel is then emitted with: a fusion only CP-SAT can place is taken when CP-SAT is asked for)."""
    try:
        graph = record_kernel(nodes)
        plan_split(graph, Tiles(graph))
    except RowOverflow:
        return fits_looped(graph)
    except UnsupportedError:
        return False
    return True


def _kernel_name(origins: list[str]) -> str:
    ops = []
    for origin in origins:
        parts = origin.split(".")
        op = re.sub(r"\W", "", parts[1] if len(parts) > 1 else parts[0])
        if op not in ops:
            ops.append(op)
    return "ring_" + "_".join(ops[:4])


class RingScheduling(BaseScheduling):
    """Fuses pointwise and last-dim reduction nodes that tile one [rows, cols] space; one program per group."""

    def get_backend_features(self, device: Any) -> Any:
        """Reductions stay whole (one row per core), never split into Inductor's two-stage form."""
        return OrderedSet([BackendFeature.REDUCE_TO_SINGLE_ELEMENT])

    def group_fn(self, sizes: Any) -> Any:
        return tuple(V.graph.sizevars.simplify(sympy_product(s)) for s in sizes)

    def can_fuse_vertical(self, node1: Any, node2: Any) -> bool:
        if node1.is_template():
            if not config.fuse_matmul_epilogues:
                return False
            template, epilogue = _template_and_epilogue(node1)
            return fusion.choose(template.node, [*epilogue, *node2.get_nodes()]).fused
        return _fits([*node1.get_nodes(), *node2.get_nodes()])

    def can_fuse_horizontal(self, node1: Any, node2: Any) -> bool:
        if node1.is_template() or node2.is_template():
            return False
        return _fits([*node1.get_nodes(), *node2.get_nodes()])

    def codegen_node(self, node: Any) -> None:
        nodes = list(node.get_nodes())
        try:
            graph = record_kernel(nodes)
            graph.drop_stores(drop_fused_buffers([op.buffer for op, _ in graph.stores], nodes))
            graph.fold_casts()
            wrapper = V.graph.wrapper_code
            name = f"{_kernel_name(graph.origins)}_{wrapper.next_kernel_suffix()}"
            try:
                program, decisions = build_program(name, graph)
            except RowOverflow as overflow:
                program, decisions = build_looped(name, graph, overflow)
        except UnsupportedError as error:
            ops = ", ".join(sorted(set(_origins_with_dtypes(nodes))))
            raise UnsupportedError(f"ring_inductor cannot compile {ops}: {error}") from None
        self._emit(name, program, decisions, graph, nodes)

    def _emit(self, name: str, program: Any, decisions: Any, graph: Any, nodes: list[Any]) -> None:
        """The kernel's definition in the wrapper's header and its call, binding each operand to its buffer."""
        wrapper = V.graph.wrapper_code
        arguments: list[str] = []
        bindings = []
        for op in graph.operands:
            real = wrapper_name(op.buffer)
            if real not in arguments:
                arguments.append(real)
            elements = math.prod(program["buffers"][op.name]["shape"])
            a = op.access
            bindings.append(
                (op.name, arguments.index(real), a.kind, a.sizes, a.strides, a.offset, elements, op.is_output)
            )
        dump.write(name, program, decisions)
        for n in nodes:
            n.mark_run()
        wrapper.header.splice(f"{name} = RingKernel.from_json({json.dumps(program)!r}, {bindings!r})")
        wrapper.writeline(f"{name}({', '.join(arguments)})")
        self.free_buffers_in_scheduler()

    def codegen_template(self, template_node: Any, epilogue_nodes: Any, prologue_nodes: Any) -> None:
        """A matmul template (`template.RingMatmulBuffer`): with the consumers the co-optimiser fused into it, or a
        planned addmm's bias, one kernel (`fusion`); else the `ring_inductor::` matmul call."""
        buffer, wrapper, epilogue = template_node.node, V.graph.wrapper_code, list(epilogue_nodes)
        if epilogue:
            choice = fusion.choose(buffer, epilogue)
        else:
            choice = fusion.planned_bias(buffer) if config.fuse_matmul_epilogues else None
        if choice is None:
            arguments = ", ".join(x.codegen_reference() for x in buffer.inputs)
            wrapper.writeline(f"{buffer.get_name()} = torch.ops.ring_inductor.{buffer.fn}({arguments})")
            template_node.mark_run()
            self.free_buffers_in_scheduler()
            return
        nodes = [template_node, *epilogue]
        graph = fusion.fused_graph(buffer, epilogue)
        stored = [op.buffer for op, _ in graph.stores]
        graph.drop_stores(drop_fused_buffers([*stored, buffer.get_name()], nodes))
        if buffer.get_name() not in V.graph.removed_buffers:
            fusion.keep_product(graph, buffer)
            size, dtype, device = tuple(int(s) for s in buffer.get_size()), buffer.get_dtype(), buffer.get_device()
            wrapper.writeline(f"{buffer.get_name()} = torch.empty({size}, dtype={dtype}, device='{device}')")
        name = f"{_kernel_name(graph.origins)}_{wrapper.next_kernel_suffix()}"
        if choice.division is not None:
            program, decisions, graph = fusion_planned.build(name, graph, choice.division, choice.split)
        else:
            program, decisions = build_program(name, graph)
        decisions["fusion"] = choice.decisions()
        self._emit(name, program, decisions, graph, nodes)

    def codegen_sync(self) -> None:
        """Kernels run synchronously on the simulator: nothing to wait for."""

    def flush(self) -> None:
        """Every kernel is emitted whole by codegen_node: nothing is pending."""

    def ready_to_flush(self) -> bool:
        return False


def _template_and_epilogue(node: Any) -> tuple[Any, list[Any]]:
    """A (possibly already fused) template node's matmul node and the consumers fused into it so far."""
    nodes = list(node.get_nodes())
    template = next(n for n in nodes if n.is_template())
    return template, [n for n in nodes if n is not template]


def _origins_with_dtypes(nodes: list[Any]) -> list[str]:
    out = []
    for node in nodes:
        for origin in node.node.get_origins():
            if origin.op == "call_function":
                meta = origin.meta.get("val")
                dtype = str(getattr(meta, "dtype", "")).removeprefix("torch.")
                out.append(f"{origin.target} ({dtype})" if dtype else str(origin.target))
    return out
