"""A small kernel-graph IR: named tensors (shape, dtype) and the ops between them, checked as they are added."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

#: Bytes per element of each dtype the planner handles (the device's floating storage dtypes).
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}


class GraphError(ValueError):
    """A graph that cannot be planned; the message names the tensor, op or field at fault."""


class OpKind(StrEnum):
    POINTWISE = "pointwise"
    REDUCTION = "reduction"
    MATMUL = "matmul"
    RESTICKIFY = "restickify"
    RELAYOUT = "relayout"


@dataclass(frozen=True, slots=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    #: the dim a graph input's sticks run along as it is stored (None: the last, the host's layout)
    stick: int | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES[self.dtype]


@dataclass(frozen=True, slots=True)
class Op:
    """One kernel-level op. `fn` is the aten name the device runs; `dim` is a reduction's dim (kept, size 1)."""

    name: str
    kind: OpKind
    fn: str
    inputs: tuple[str, ...]
    output: str
    dim: int | None = None


@dataclass
class Graph:
    """Tensors and ops in a valid execution order; graph inputs are tensors no op produces."""

    tensors: dict[str, Tensor] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def tensor(self, name: str, shape: Sequence[int], dtype: str = "float16", stick: int | None = None) -> Tensor:
        """Declare a tensor (a graph input unless an op later produces it), stored with sticks along `stick`."""
        if name in self.tensors:
            raise GraphError(f"tensor {name!r} is declared twice")
        if dtype not in DTYPE_BYTES:
            raise GraphError(f"tensor {name!r}: dtype {dtype!r} is not one of {sorted(DTYPE_BYTES)}")
        if not shape or any(not isinstance(size, int) or isinstance(size, bool) or size < 1 for size in shape):
            raise GraphError(f"tensor {name!r}: shape {list(shape)} must be a non-empty list of positive integers")
        if stick is not None and not 0 <= stick < len(shape):
            raise GraphError(f"tensor {name!r}: stick {stick} is not a dim of shape {list(shape)}")
        self.tensors[name] = Tensor(name, tuple(shape), dtype, stick)
        return self.tensors[name]

    def producer(self, name: str) -> Op | None:
        return next((op for op in self.ops if op.output == name), None)

    def consumers(self, name: str) -> list[Op]:
        return [op for op in self.ops if name in op.inputs]

    @property
    def inputs(self) -> list[str]:
        produced = {op.output for op in self.ops}
        return [name for name in self.tensors if name not in produced]

    def _add(self, op: Op, shape: Sequence[int], dtype: str) -> Tensor:
        for name in op.inputs:
            if name not in self.tensors:
                raise GraphError(f"op {op.name!r}: input {name!r} is not a declared tensor")
        if any(existing.name == op.name for existing in self.ops):
            raise GraphError(f"op {op.name!r} is declared twice")
        output = self.tensor(op.output, shape, dtype)
        self.ops.append(op)
        return output

    def pointwise(self, name: str, fn: str, inputs: Sequence[str], output: str) -> Tensor:
        """An elementwise op; inputs broadcast against the first (same rank, size 1 where they broadcast)."""
        shapes = [self._shape(name, tensor) for tensor in inputs]
        if not shapes:
            raise GraphError(f"op {name!r}: a pointwise op needs at least one input")
        shape = shapes[0]
        for tensor, other in zip(inputs[1:], shapes[1:], strict=True):
            if len(other) != len(shape) or any(o not in (1, s) for o, s in zip(other, shape, strict=True)):
                raise GraphError(
                    f"op {name!r}: input {tensor!r} of shape {list(other)} does not broadcast to {list(shape)}"
                )
        dtype = self.tensors[inputs[0]].dtype
        return self._add(Op(name, OpKind.POINTWISE, fn, tuple(inputs), output), shape, dtype)

    def reduction(self, name: str, fn: str, source: str, dim: int, output: str) -> Tensor:
        """A reduction along `dim`, kept as a size-1 dim."""
        shape = list(self._shape(name, source))
        if not -len(shape) <= dim < len(shape):
            raise GraphError(f"op {name!r}: dim {dim} is out of range for {source!r} of rank {len(shape)}")
        dim %= len(shape)
        shape[dim] = 1
        dtype = self.tensors[source].dtype
        return self._add(Op(name, OpKind.REDUCTION, fn, (source,), output, dim), shape, dtype)

    def matmul(self, name: str, left: str, right: str, output: str) -> Tensor:
        """[M, K] x [K, N] -> [M, N]."""
        a, b = self._shape(name, left), self._shape(name, right)
        if len(a) != 2 or len(b) != 2 or a[1] != b[0]:
            raise GraphError(f"op {name!r}: cannot multiply {list(a)} by {list(b)}")
        return self._add(Op(name, OpKind.MATMUL, "mm", (left, right), output), (a[0], b[1]), self.tensors[left].dtype)

    def transpose(self, name: str, source: str, output: str) -> Tensor:
        """A 2-D relayout: the device moves sticks between cores to swap the dims (a matmul operand's K^T)."""
        shape = self._shape(name, source)
        if len(shape) != 2:
            raise GraphError(f"op {name!r}: transpose takes a 2-D tensor, not {list(shape)}")
        return self._add(Op(name, OpKind.RELAYOUT, "t", (source,), output), shape[::-1], self.tensors[source].dtype)

    def _shape(self, op: str, tensor: str) -> tuple[int, ...]:
        if tensor not in self.tensors:
            raise GraphError(f"op {op!r}: input {tensor!r} is not a declared tensor")
        return self.tensors[tensor].shape

    def with_op(self, op: Op, before: Op, output: Tensor, rewire: Iterable[Op]) -> Graph:
        """A copy with `op` (producing `output`) inserted before `before`, and `rewire` ops reading its output."""
        targets = {id(item) for item in rewire}
        source = op.inputs[0]
        ops: list[Op] = []
        for existing in self.ops:
            if existing is before:
                ops.append(op)
            if id(existing) in targets:
                inputs = tuple(output.name if name == source else name for name in existing.inputs)
                existing = Op(existing.name, existing.kind, existing.fn, inputs, existing.output, existing.dim)
            ops.append(existing)
        return Graph({**self.tensors, output.name: output}, ops, list(self.outputs))


def graph_from_dict(data: Mapping[str, Any]) -> Graph:
    """Build a graph from its JSON form: {"tensors": {name: {"shape", "dtype"}}, "ops": [...], "outputs": [...]}.

    Raises GraphError naming the JSON path of the first bad field.
    """
    if not isinstance(data, Mapping):
        raise GraphError("$: a graph is a JSON object")
    unknown = set(data) - {"tensors", "ops", "outputs"}
    if unknown:
        raise GraphError(f"$: unknown field {sorted(unknown)[0]!r}")
    graph = Graph()
    tensors = _field(data, "tensors", Mapping, "$")
    for name, spec in tensors.items():
        path = f"$.tensors.{name}"
        if not isinstance(spec, Mapping):
            raise GraphError(f"{path}: a tensor is an object with shape and dtype")
        shape = _field(spec, "shape", list, path)
        dtype = spec.get("dtype", "float16")
        try:
            graph.tensor(name, shape, dtype)
        except GraphError as error:
            raise GraphError(f"{path}: {error}") from None
    for index, spec in enumerate(_field(data, "ops", list, "$")):
        _add_op(graph, spec, f"$.ops[{index}]")
    outputs = data.get("outputs", [])
    if not isinstance(outputs, list) or any(name not in graph.tensors for name in outputs):
        raise GraphError("$.outputs: a list of declared tensor names")
    graph.outputs = list(outputs)
    return graph


def _field(data: Mapping[str, Any], key: str, kind: type, path: str) -> Any:
    if key not in data:
        raise GraphError(f"{path}: missing field {key!r}")
    value = data[key]
    if not isinstance(value, kind):
        raise GraphError(f"{path}.{key}: expected {'an object' if kind is Mapping else 'a list'}")
    return value


def _add_op(graph: Graph, spec: Any, path: str) -> None:
    if not isinstance(spec, Mapping):
        raise GraphError(f"{path}: an op is an object")
    kind = spec.get("kind")
    builders = {"pointwise": ("fn", "inputs"), "reduction": ("fn", "input", "dim"), "matmul": ("inputs",)}
    if kind not in builders:
        raise GraphError(f"{path}.kind: expected one of {sorted(builders)}, got {kind!r}")
    allowed = {"kind", "name", "output", *builders[kind]}
    unknown = set(spec) - allowed
    if unknown:
        raise GraphError(f"{path}: unknown field {sorted(unknown)[0]!r}")
    for key in ("name", "output", *builders[kind]):
        if key not in spec:
            raise GraphError(f"{path}: missing field {key!r}")
    name, output = spec["name"], spec["output"]
    if not isinstance(name, str) or not isinstance(output, str):
        raise GraphError(f"{path}: name and output are strings")
    try:
        if kind == "pointwise":
            inputs = spec["inputs"]
            if not isinstance(inputs, list) or not all(isinstance(item, str) for item in inputs):
                raise GraphError("inputs: a list of tensor names")
            graph.pointwise(name, str(spec["fn"]), inputs, output)
        elif kind == "reduction":
            dim = spec["dim"]
            if not isinstance(dim, int) or isinstance(dim, bool):
                raise GraphError("dim: an integer")
            graph.reduction(name, str(spec["fn"]), str(spec["input"]), dim, output)
        else:
            inputs = spec["inputs"]
            if not isinstance(inputs, list) or len(inputs) != 2 or not all(isinstance(i, str) for i in inputs):
                raise GraphError("inputs: a list of two tensor names")
            graph.matmul(name, inputs[0], inputs[1], output)
    except GraphError as error:
        raise GraphError(f"{path}: {error}") from None
