"""A kernel plan: the program for one call signature, which operand fills which buffer, and what is returned.

Plans are built once per signature (op, shapes, dtypes, non-tensor arguments) and kept, so a repeated call costs a
dictionary lookup, an allocation per output and one engine launch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ringsim import engine, runtime

Values = list[Any]


@dataclass(frozen=True)
class OutputSpec:
    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype


@dataclass(frozen=True)
class Plan:
    """What one call signature runs."""

    key: Any
    program: dict[str, Any] | None  # None: nothing to compute (an empty output)
    inputs: tuple[tuple[str, Callable[[Values], torch.Tensor]], ...]
    outputs: tuple[OutputSpec, ...]
    finish: Callable[[Values, list[torch.Tensor]], Any]

    def run(self, values: Values, device: torch.device, into: Sequence[torch.Tensor | None] = ()) -> Any:
        """Allocate outputs (or use `into`, contiguous tensors of the right shape and dtype), launch, finish."""
        outs = [
            into[i] if i < len(into) and into[i] is not None else torch.empty(o.shape, dtype=o.dtype, device=device)
            for i, o in enumerate(self.outputs)
        ]
        if self.program is not None:
            buffers = {name: _bind(get(values)) for name, get in self.inputs}
            for spec, out in zip(self.outputs, outs, strict=True):
                buffers[spec.name] = _bind(out)
            try:
                engine.launch(self.program, buffers, key=self.key)
            except engine.ProgramError as error:
                refused = error.__cause__
                if isinstance(refused, (RuntimeError, ValueError, IndexError, TypeError)):
                    raise refused from None  # the op refused its arguments: torch's own error, as on CPU
                raise
        return self.finish(values, outs)


def _bind(tensor: torch.Tensor) -> torch.Tensor:
    """The CPU alias of a contiguous, stick-aligned device tensor (operands are made so before planning)."""
    return runtime.host_view(tensor)


def returns_first(values: Values, outs: list[torch.Tensor]) -> torch.Tensor:
    return outs[0]


def returns_all(values: Values, outs: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    return tuple(outs)
