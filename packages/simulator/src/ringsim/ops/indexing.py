"""Indexing with tensors, and results whose size depends on the data (nonzero, masked_select, unique).

Tensor indices run as one-core gather/scatter programs (``index_gather``/``index_scatter``). A bool mask index
becomes long indices through the device's own ``nonzero``. A data-dependent size is found the way an accelerator
finds it: a counting program first (``count_nonzero``), whose one number the host reads (a sync, as on CUDA),
then the program sized by it; ``nonzero_static`` is given its size, so it runs that program with no count.
``unique_consecutive`` and ``unique`` are compositions of device kernels.
"""

from __future__ import annotations

from typing import Any

import torch

from ringsim.engine.compute import spread_indices
from ringsim.ops import caller_warnings, errors, layout
from ringsim.ops.calls import Signature
from ringsim.ops.dispatch import aligned
from ringsim.ops.plan import OutputSpec, Plan, returns_first
from ringsim.ops.programs import Operand, Step, row_program
from ringsim.ops.registry import OpSpec
from ringsim.torchbridge import OpOverload

_PLANS: dict[Any, Plan] = {}
_MASKS = (torch.bool, torch.uint8)
_BYTE_MASK_DEPRECATED = "indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead."


def _check(spec: OpSpec, qualname: str, t: torch.Tensor) -> None:
    if t.dtype not in spec.dtypes:
        raise errors.unsupported_dtype(qualname, t.dtype, spec.dtypes)


def _meta(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(t.shape, dtype=t.dtype, device="meta")


def _on_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    return t if t.device == device else t.to(device)


def long_indices(source: torch.Tensor, indices: list[torch.Tensor | None]) -> tuple[list[int], list[torch.Tensor]]:
    """The dims indexed and one contiguous int64 device index per dim; a k-dim mask becomes k indices (its nonzero
    columns)."""
    positions: list[int] = []
    tensors: list[torch.Tensor] = []
    dim = 0
    for index in indices:
        if index is None:
            dim += 1
            continue
        index = _on_device(index, source.device)
        if index.dtype in _MASKS:
            if index.dtype == torch.uint8:
                caller_warnings.warn(_BYTE_MASK_DEPRECATED)
            _check_mask(source, index, dim)
            coords = torch.nonzero(index)
            for j in range(index.dim()):
                positions.append(dim + j)
                tensors.append(coords[:, j].contiguous())
            dim += index.dim()
        else:
            if index.is_floating_point():
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            positions.append(dim)
            tensors.append(_prepared(index if index.dtype == torch.int64 else index.long()))
            dim += 1
    _check_broadcast(tensors)
    return positions, tensors


def _check_broadcast(tensors: list[torch.Tensor]) -> None:
    """The indices must broadcast together, as torch requires (its IndexError, word for word)."""
    try:
        torch.broadcast_shapes(*(t.shape for t in tensors))
    except RuntimeError:
        shapes = ", ".join(str(list(t.shape)) for t in tensors)
        message = f"shape mismatch: indexing tensors could not be broadcast together with shapes {shapes}"
        raise IndexError(message) from None


def _check_values(values: torch.Tensor, result: torch.Size) -> None:
    """``x[idx] = v`` needs `v` to broadcast to ``x[idx]``'s shape (leading size-1 dims dropped), as on CPU."""
    shape = list(values.shape)
    while len(shape) > len(result) and shape[0] == 1:
        shape.pop(0)
    try:
        torch.empty(shape, device="meta").expand(result)
    except RuntimeError:
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast to indexing result of "
            f"shape {list(result)}"
        ) from None


def _check_mask(source: torch.Tensor, mask: torch.Tensor, dim: int) -> None:
    """A mask must match the dims it indexes, as torch requires (its IndexError, word for word)."""
    for j, size in enumerate(mask.shape):
        if dim + j >= source.dim() or source.shape[dim + j] != size:
            indexed = list(source.shape)
            raise IndexError(
                f"The shape of the mask {list(mask.shape)} at index {j} does not match the shape of the indexed "
                f"tensor {indexed} at index {dim + j}"
            )


def _program(name: str, inputs: list[tuple[str, torch.Tensor]], outputs: list[OutputSpec], steps: list[Step]):
    operands = [Operand(n, t.dtype, tuple(t.shape), split=False) for n, t in inputs]
    operands += [Operand(o.name, o.dtype, o.shape, split=False, role="out") for o in outputs]
    return row_program(name, 1, operands, steps)


def _cached(key: Any, make) -> Plan:
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = make()
    return plan


def _signature(tensors: list[torch.Tensor]) -> tuple:
    return tuple((t.dtype, tuple(t.shape)) for t in tensors)


def _getters(count: int):
    return tuple((f"in{i}", (lambda values, i=i: values[i])) for i in range(count))


def index_kernel(spec: OpSpec, qualname: str):
    """``x[idx...]`` (``aten::index.Tensor``)."""

    def index(self: torch.Tensor, indices: list[torch.Tensor | None]) -> torch.Tensor:
        _check(spec, qualname, self)
        positions, tensors = long_indices(self, list(indices))
        if not positions:
            return self.clone()
        out = torch.ops.aten.index.Tensor(_meta(self), spread_indices([_meta(t) for t in tensors], positions))
        if out.numel() == 0:
            return torch.empty(out.shape, dtype=self.dtype, device=self.device)
        key = ("index", _signature([self, *tensors]), tuple(positions))

        def make() -> Plan:
            names = [f"in{i}" for i in range(len(tensors) + 1)]
            outputs = [OutputSpec("out", tuple(out.shape), self.dtype)]
            step = Step("index_gather", tuple(names), ("out",), {"positions": positions})
            program = _program("index", list(zip(names, [self, *tensors], strict=True)), outputs, [step])
            return Plan(key, program, _getters(len(names)), tuple(outputs), returns_first)

        return _cached(key, make).run([_prepared(self), *tensors], self.device)

    return index


def index_put_kernel(spec: OpSpec, qualname: str):
    """``x[idx...] = v`` / ``index_put_(..., accumulate)`` (``aten::_index_put_impl_``), written into ``self``."""

    def index_put_(
        self: torch.Tensor,
        indices: list[torch.Tensor | None],
        values: torch.Tensor,
        accumulate: bool = False,
        unsafe: bool = False,
    ) -> torch.Tensor:
        _check(spec, qualname, self)
        values = _on_device(values, self.device)
        mask = None if accumulate or values.numel() != 1 else _fill_mask(self, list(indices))
        if mask is not None:
            return self.masked_fill_(mask, values.reshape(()))
        positions, tensors = long_indices(self, list(indices))
        meta_indices = spread_indices([_meta(t) for t in tensors], positions)
        torch.ops.aten.index_put.default(_meta(self), meta_indices, _meta(values), accumulate)  # torch's own checks
        _check_values(values, torch.ops.aten.index.Tensor(_meta(self), meta_indices).shape)
        if self.numel() == 0 or values.numel() == 0 or any(t.numel() == 0 for t in tensors):
            return self
        key = ("index_put", _signature([self, values, *tensors]), tuple(positions), bool(accumulate))

        def make() -> Plan:
            names = [f"in{i}" for i in range(len(tensors) + 2)]
            outputs = [OutputSpec("out", tuple(self.shape), self.dtype)]
            attrs = {"positions": positions, "accumulate": bool(accumulate)}
            step = Step("index_scatter", tuple(names), ("out",), attrs)
            program = _program("index_put", list(zip(names, [self, values, *tensors], strict=True)), outputs, [step])
            return Plan(key, program, _getters(len(names)), tuple(outputs), returns_first)

        plan = _cached(key, make)
        source = _prepared(self)
        if source is self:
            plan.run([self, _prepared(values), *tensors], self.device, into=[self])
        else:
            self.copy_(plan.run([source, _prepared(values), *tensors], self.device))
        return self

    return index_put_


def _fill_mask(source: torch.Tensor, indices: list[torch.Tensor | None]) -> torch.Tensor | None:
    """The mask of ``x[mask] = v`` with one value, shaped to broadcast against `source`, else None.

    As torch's own index_put does (canDispatchToMaskedFill), that write is a masked_fill: an elementwise kernel split
    across the cores, instead of a one-core scatter whose whole operands must fit one scratchpad (``abs_diff[matches]
    = 0`` in assert_close's mismatch message masks every element)."""
    present = [(dim, index) for dim, index in enumerate(indices) if index is not None]
    if len(present) != 1 or present[0][1].dtype != torch.bool:
        return None
    lead, mask = present[0]
    _check_mask(source, mask, lead)
    mask = _on_device(mask, source.device)
    return mask.reshape(*mask.shape, *([1] * (source.dim() - lead - mask.dim())))


def _prepared(t: torch.Tensor) -> torch.Tensor:
    """A contiguous, stick-aligned operand, as every kernel reads it (a restickify or copy when it is not)."""
    return t if aligned(t) else layout.contiguous(t)


def _count(t: torch.Tensor) -> int:
    """How many elements are nonzero: a counting program on the device, whose result the host reads."""
    return int(torch.count_nonzero(t).item())


def nonzero_plan(key: Any, name: str, source: torch.Tensor, size: int, fill_value: int) -> Plan:
    """The one-core program writing `source`'s first `size` nonzero coordinates, then `fill_value` rows: what
    ``nonzero`` runs once it has counted, and ``nonzero_static`` with the caller's size."""
    outputs = [OutputSpec("out", (size, source.dim()), torch.int64)]
    step = Step("nonzero_static", ("in0",), ("out",), {"size": size, "fill_value": fill_value})
    return Plan(key, _program(name, [("in0", source)], outputs, [step]), _getters(1), tuple(outputs), returns_first)


def nonzero_kernel(spec: OpSpec, qualname: str):
    def nonzero(self: torch.Tensor) -> torch.Tensor:
        _check(spec, qualname, self)
        n = _count(self) if self.numel() else 0
        if n == 0 or self.dim() == 0:
            return torch.empty((n, self.dim()), dtype=torch.int64, device=self.device)
        key = ("nonzero", _signature([self]), n)
        return _cached(key, lambda: nonzero_plan(key, "nonzero", self, n, -1)).run([_prepared(self)], self.device)

    return nonzero


def build_nonzero_static(spec: OpSpec, op: OpOverload, sig: Signature, values: list[Any], key: Any) -> Plan:
    """``nonzero_static``: its size is the caller's, so no count and no host read; the generic kernels around this
    builder give it its ``out=`` form and the native replay."""
    source, size, fill_value = (values[sig.index[name]] for name in ("self", "size", "fill_value"))
    if size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")  # CPU's words
    return nonzero_plan(key, sig.qualname, source, size, fill_value)


def masked_select_kernel(spec: OpSpec, qualname: str):
    def masked_select(self: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        _check(spec, qualname, self)
        mask = _on_device(mask, self.device)
        if mask.dtype != torch.bool:
            raise RuntimeError(f"masked_select: expected BoolTensor for mask, got {mask.dtype}")
        shape = torch.broadcast_shapes(self.shape, mask.shape)
        x = self.expand(shape).contiguous() if tuple(self.shape) != tuple(shape) else _prepared(self)
        m = mask.expand(shape).contiguous() if tuple(mask.shape) != tuple(shape) else _prepared(mask)
        n = _count(m) if m.numel() else 0
        if n == 0:
            return torch.empty((0,), dtype=self.dtype, device=self.device)
        key = ("masked_select", _signature([x, m]), n)

        def make() -> Plan:
            outputs = [OutputSpec("out", (n,), self.dtype)]
            operands = [
                Operand("in0", x.dtype, (x.numel(),), split=False),
                Operand("in1", m.dtype, (m.numel(),), split=False),
            ]
            operands += [
                Operand("idx", torch.int64, (n, 1), role="temp"),
                Operand("out", self.dtype, (n,), split=False, role="out"),
            ]
            steps = [
                Step("nonzero_static", ("in1",), ("idx",), {"size": n, "fill_value": 0}),
                Step("take", ("in0", "idx"), ("out",)),
            ]
            program = row_program("masked_select", 1, operands, steps)
            getters = (("in0", lambda values: values[0].reshape(-1)), ("in1", lambda values: values[1].reshape(-1)))
            return Plan(key, program, getters, tuple(outputs), returns_first)

        return _cached(key, make).run([x, m], self.device)

    return masked_select


def unique_consecutive_kernel(spec: OpSpec, qualname: str):
    """Runs of equal neighbours, from device kernels: a change mask, its masked values, a cumsum and the run starts."""

    def unique_consecutive(
        self: torch.Tensor, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        _check(spec, qualname, self)
        if dim is not None:
            raise errors.unsupported_op(f"{qualname} with dim")
        values, inverse, counts = runs(self.reshape(-1), tuple(self.shape))
        return values, *_requested(self.device, (inverse, return_inverse), (counts, return_counts))

    return unique_consecutive


def runs(flat: torch.Tensor, shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(values, inverse shaped `shape`, counts) of the runs of equal consecutive elements of `flat`."""
    device = flat.device
    n = flat.numel()
    if n == 0:
        empty = torch.empty(0, dtype=torch.int64, device=device)
        return flat.clone(), torch.empty(shape, dtype=torch.int64, device=device), empty
    starts = torch.ones(n, dtype=torch.bool, device=device)
    if n > 1:
        starts[1:] = flat[1:] != flat[:-1]
    values = torch.masked_select(flat, starts)
    inverse = (torch.cumsum(starts, 0) - 1).reshape(shape)
    first = torch.nonzero(starts).reshape(-1)
    ends = torch.cat([first[1:], torch.full((1,), n, dtype=torch.int64, device=device)])
    return values, inverse, ends - first


def unique_kernel(spec: OpSpec, qualname: str):
    """``torch.unique``: sort on the device, then the runs of the sorted values, inverse scattered back."""

    def _unique2(
        self: torch.Tensor, sorted_: bool = True, return_inverse: bool = False, return_counts: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        _check(spec, qualname, self)
        flat = self.reshape(-1)
        ordered, order = torch.sort(flat, stable=True)
        values, inverse_sorted, counts = runs(ordered, (flat.numel(),))
        inverse = torch.empty_like(inverse_sorted)
        if flat.numel():
            inverse[order] = inverse_sorted
        inverse = inverse.reshape(self.shape)
        return values, *_requested(self.device, (inverse, return_inverse), (counts, return_counts))

    return _unique2


def _requested(device: torch.device, *results: tuple[torch.Tensor, bool]) -> tuple[torch.Tensor, ...]:
    """As torch returns them: a result that was not asked for is an empty tensor."""
    return tuple(t if wanted else torch.empty(0, dtype=torch.int64, device=device) for t, wanted in results)


KERNELS = {
    "index": index_kernel,
    "_index_put_impl_": index_put_kernel,
    "nonzero": nonzero_kernel,
    "masked_select": masked_select_kernel,
    "unique_consecutive": unique_consecutive_kernel,
    "_unique2": unique_kernel,
}
