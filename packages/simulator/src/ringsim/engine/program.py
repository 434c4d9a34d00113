"""Typed program objects and the parser that builds them from the JSON shape (`ringsim-program/1`).

The parser checks structure only (fields, types, names); `validate.py` checks what the hardware would refuse.
Every error carries the JSON path of the offending value so a user can find it in a large file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from .dtypes import DEVICE_DTYPES
from .errors import ProgramError

FORMAT = "ringsim-program/1"
NUM_CORES = 32
BUFFER_INITS = ("zeros", "ones", "arange", "randn")


@dataclass(frozen=True, slots=True)
class BufferSpec:
    """A device-memory tensor the program reads or writes; bound to real memory at launch."""

    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    init: str | None = None
    nbytes: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nbytes", math.prod(self.shape) * self.dtype.itemsize)


@dataclass(frozen=True, slots=True)
class TileSpec:
    """A typed region of one core's scratchpad; tiles that overlap alias the same bytes."""

    name: str
    offset: int
    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize

    @property
    def end(self) -> int:
        return self.offset + self.nbytes


@dataclass(frozen=True, slots=True)
class DmaIn:
    buffer: str
    offset: int
    tile: str
    op = "dma_in"


@dataclass(frozen=True, slots=True)
class DmaOut:
    tile: str
    buffer: str
    offset: int
    op = "dma_out"


@dataclass(frozen=True, slots=True)
class Compute:
    fn: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any]
    op = "compute"


@dataclass(frozen=True, slots=True)
class Send:
    to: int
    tile: str
    op = "send"


@dataclass(frozen=True, slots=True)
class Recv:
    source: int
    tile: str
    op = "recv"


@dataclass(frozen=True, slots=True)
class Barrier:
    op = "barrier"


Instruction = DmaIn | DmaOut | Compute | Send | Recv | Barrier


@dataclass(frozen=True, slots=True)
class CoreProgram:
    core: int
    tiles: Mapping[str, TileSpec]
    instructions: tuple[Instruction, ...]


@dataclass(eq=False, slots=True)
class Program:
    """A parsed kernel. `plan` caches validation and timing, which depend on the program only, not the data."""

    name: str
    buffers: Mapping[str, BufferSpec]
    cores: tuple[CoreProgram, ...]
    plan: Any = field(default=None, repr=False)


class _Node:
    """A JSON value with its path, so every structural error can point at where it is."""

    __slots__ = ("core", "index", "op", "path", "value")

    def __init__(self, value: Any, path: str, core: int | None = None, index: int | None = None, op: str | None = None):
        self.value = value
        self.path = path
        self.core = core
        self.index = index
        self.op = op

    def fail(self, message: str) -> ProgramError:
        return ProgramError(message, core=self.core, index=self.index, op=self.op, path=self.path)

    def child(self, key: str | int) -> _Node:
        path = f"{self.path}[{key}]" if isinstance(key, int) else f"{self.path}.{key}"
        return _Node(self.value[key], path, self.core, self.index, self.op)

    def object(self, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, _Node]:
        if not isinstance(self.value, dict):
            raise self.fail(f"expected an object, got {_kind(self.value)}")
        for key in required:
            if key not in self.value:
                raise self.fail(f"missing field {key!r}")
        unknown = sorted(set(self.value) - set(required) - set(optional), key=str)
        if unknown:
            raise self.fail(f"unknown field {unknown[0]!r} (expected {', '.join(required + optional)})")
        return {key: self.child(key) for key in self.value}

    def items(self) -> list[tuple[str, _Node]]:
        if not isinstance(self.value, dict):
            raise self.fail(f"expected an object, got {_kind(self.value)}")
        return [(key, self.child(key)) for key in self.value]

    def elements(self) -> list[_Node]:
        if not isinstance(self.value, list):
            raise self.fail(f"expected a list, got {_kind(self.value)}")
        return [self.child(i) for i in range(len(self.value))]

    def integer(self, minimum: int | None = None) -> int:
        if not isinstance(self.value, int) or isinstance(self.value, bool):
            raise self.fail(f"expected an integer, got {_kind(self.value)}")
        if minimum is not None and self.value < minimum:
            raise self.fail(f"expected an integer >= {minimum}, got {self.value}")
        return self.value

    def string(self) -> str:
        if not isinstance(self.value, str):
            raise self.fail(f"expected a string, got {_kind(self.value)}")
        return self.value

    def name(self, kind: str) -> str:
        text = self.string()
        if not text:
            raise self.fail(f"{kind} name must not be empty")
        return text

    def dtype(self) -> torch.dtype:
        text = self.string()
        if text not in DEVICE_DTYPES:
            raise self.fail(f"{text!r} is not a device dtype (expected one of {', '.join(DEVICE_DTYPES)})")
        return DEVICE_DTYPES[text]

    def shape(self) -> tuple[int, ...]:
        return tuple(node.integer(minimum=0) for node in self.elements())


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def parse_program(document: Any) -> Program:
    """Build a Program from its JSON shape (a dict as `json.load` returns it); raise ProgramError if malformed."""
    if isinstance(document, Program):
        return document
    root = _Node(document, "$")
    fields = root.object(("format", "name", "buffers", "cores"))
    if fields["format"].value != FORMAT:
        raise fields["format"].fail(f"unsupported format {fields['format'].value!r} (expected {FORMAT!r})")
    name = fields["name"].name("program")
    buffers = {key: _parse_buffer(key, node) for key, node in fields["buffers"].items()}
    cores: list[CoreProgram] = []
    seen: set[int] = set()
    for node in fields["cores"].elements():
        core = _parse_core(node)
        if core.core in seen:
            raise node.child("core").fail(f"core {core.core} is listed twice")
        seen.add(core.core)
        cores.append(core)
    if not cores:
        raise fields["cores"].fail("a program needs at least one core with work")
    return Program(name=name, buffers=buffers, cores=tuple(cores))


def _parse_buffer(name: str, node: _Node) -> BufferSpec:
    if not name:
        raise node.fail("buffer name must not be empty")
    fields = node.object(("dtype", "shape"), ("init",))
    init = None
    if "init" in fields:
        init = fields["init"].string()
        if init not in BUFFER_INITS:
            raise fields["init"].fail(f"unknown init {init!r} (expected one of {', '.join(BUFFER_INITS)})")
    return BufferSpec(name=name, dtype=fields["dtype"].dtype(), shape=fields["shape"].shape(), init=init)


def _parse_core(node: _Node) -> CoreProgram:
    fields = node.object(("core", "instructions"), ("tiles",))
    core = fields["core"].integer(minimum=0)
    if core >= NUM_CORES:
        raise fields["core"].fail(f"core {core} does not exist (the device has cores 0..{NUM_CORES - 1})")
    tiles: dict[str, TileSpec] = {}
    if "tiles" in fields:
        for key, tile_node in fields["tiles"].items():
            tile_node.core = core
            tiles[key] = _parse_tile(key, tile_node)
    instructions = []
    for index, instr_node in enumerate(fields["instructions"].elements()):
        instr_node.core, instr_node.index = core, index
        instructions.append(_parse_instruction(instr_node))
    return CoreProgram(core=core, tiles=tiles, instructions=tuple(instructions))


def _parse_tile(name: str, node: _Node) -> TileSpec:
    if not name:
        raise node.fail("tile name must not be empty")
    fields = node.object(("offset", "dtype", "shape"))
    return TileSpec(
        name=name,
        offset=fields["offset"].integer(minimum=0),
        dtype=fields["dtype"].dtype(),
        shape=fields["shape"].shape(),
    )


def _parse_instruction(node: _Node) -> Instruction:
    if not isinstance(node.value, dict):
        raise node.fail(f"expected an instruction object, got {_kind(node.value)}")
    if "op" not in node.value:
        raise node.fail("missing field 'op'")
    op = node.child("op").string()
    parser = _INSTRUCTION_PARSERS.get(op)
    if parser is None:
        raise node.child("op").fail(f"unknown op {op!r} (expected one of {', '.join(_INSTRUCTION_PARSERS)})")
    node.op = op
    return parser(node)


def _parse_dma_in(node: _Node) -> DmaIn:
    f = node.object(("op", "buffer", "offset", "tile"))
    return DmaIn(buffer=f["buffer"].name("buffer"), offset=f["offset"].integer(minimum=0), tile=f["tile"].name("tile"))


def _parse_dma_out(node: _Node) -> DmaOut:
    f = node.object(("op", "tile", "buffer", "offset"))
    return DmaOut(tile=f["tile"].name("tile"), buffer=f["buffer"].name("buffer"), offset=f["offset"].integer(minimum=0))


def _parse_compute(node: _Node) -> Compute:
    f = node.object(("op", "fn", "inputs", "output"), ("attrs",))
    inputs = tuple(item.name("tile") for item in f["inputs"].elements())
    output = f["output"]
    outputs = (
        (output.name("tile"),)
        if not isinstance(output.value, list)
        else tuple(item.name("tile") for item in output.elements())
    )
    if not outputs:
        raise output.fail("a compute needs at least one output tile")
    attrs = {}
    if "attrs" in f:
        attrs = {key: value.value for key, value in f["attrs"].items()}
    return Compute(fn=f["fn"].name("fn"), inputs=inputs, outputs=outputs, attrs=attrs)


def _parse_send(node: _Node) -> Send:
    f = node.object(("op", "to", "tile"))
    return Send(to=f["to"].integer(minimum=0), tile=f["tile"].name("tile"))


def _parse_recv(node: _Node) -> Recv:
    f = node.object(("op", "from", "tile"))
    return Recv(source=f["from"].integer(minimum=0), tile=f["tile"].name("tile"))


def _parse_barrier(node: _Node) -> Barrier:
    node.object(("op",))
    return Barrier()


_INSTRUCTION_PARSERS = {
    "dma_in": _parse_dma_in,
    "dma_out": _parse_dma_out,
    "compute": _parse_compute,
    "send": _parse_send,
    "recv": _parse_recv,
    "barrier": _parse_barrier,
}
