"""Matmul kernels (mm, addmm, addmv, bmm, dot): split M (or the batch) across cores, the right operand whole per core.

Each core's systolic arrays accumulate the K products of an output element in fp32 and round once.
"""

from __future__ import annotations

from typing import Any

import torch

from ringsim.ops.calls import Signature
from ringsim.ops.elementwise import meta_outputs, scalar
from ringsim.ops.plan import OutputSpec, Plan, Values, returns_first
from ringsim.ops.programs import Operand, Step, row_program
from ringsim.ops.registry import OpSpec
from ringsim.torchbridge import OpOverload


def _arg(i: int):
    return lambda values: values[i]


def build(spec: OpSpec, op: OpOverload, sig: Signature, values: Values, key: Any) -> Plan:
    out = meta_outputs(op, values)[0]
    shape = tuple(out.shape)
    outputs = (OutputSpec("out", shape, out.dtype),)
    if out.numel() == 0:
        return Plan(key, None, (), outputs, returns_first)
    tensors = [i for i, v in enumerate(values) if isinstance(v, torch.Tensor)]
    attrs = {p.name: scalar(values[i]) for i, p in enumerate(sig.params) if i not in tensors}
    operands: list[Operand] = []
    if spec.aten == "dot":
        rows = 1
        operands = [
            Operand(f"in{n}", values[i].dtype, tuple(values[i].shape), split=False) for n, i in enumerate(tensors)
        ]
        operands.append(Operand("out", out.dtype, (), split=False, role="out"))
    else:
        rows = shape[0]
        for n, i in enumerate(tensors):
            t = values[i]
            name = f"in{n}"
            if spec.aten in ("addmm", "addmv") and n == 0:  # the bias: split when it has the output's rows
                split = t.dim() == len(shape) and t.shape[0] == rows and rows > 1
                operands.append(Operand(name, t.dtype, tuple(t.shape[1:]) if split else tuple(t.shape), split=split))
            elif spec.aten == "bmm" or (spec.aten == "mm" and n == 0) or (spec.aten in ("addmm", "addmv") and n == 1):
                operands.append(Operand(name, t.dtype, tuple(t.shape[1:])))
            else:
                operands.append(Operand(name, t.dtype, tuple(t.shape), split=False))
        operands.append(Operand("out", out.dtype, shape[1:], role="out"))
    step = Step(sig.qualname, tuple(f"in{n}" for n in range(len(tensors))), ("out",), attrs)
    program = row_program(sig.qualname, rows, operands, [step])
    return Plan(key, program, tuple((f"in{n}", _arg(i)) for n, i in enumerate(tensors)), outputs, returns_first)
