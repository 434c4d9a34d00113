"""The torch private APIs evidence relies on are where `testselect.torchprivate` expects them: fails loudly if moved."""

from __future__ import annotations

import pytest
import torch
from testselect.evidence.plugin import outcome
from testselect.torchprivate import OpRecorder, dtype_name, op_name


def test_private_apis_still_there() -> None:
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    assert issubclass(OpRecorder, TorchDispatchMode)
    assert tree_leaves(((1, [2]), {"a": 3})) == [1, 2, 3]
    assert torch.ops.aten.mul.Scalar._schema.overload_name == "Scalar"


def test_recorder_names_overloads_and_dtypes() -> None:
    with OpRecorder() as recorder:
        x = torch.ones(2, dtype=torch.float64)
        torch.mm(x.view(1, 2), x.view(2, 1))
        x.mul(2)
    assert op_name(torch.ops.aten.mm.default) == "aten::mm"
    assert recorder.counts["aten::mm"] == 1
    assert recorder.dtypes["aten::ones"] == {"float64"}  # a factory's dtype= argument
    assert "aten::mul.Tensor" in recorder.counts or "aten::mul.Scalar" in recorder.counts
    assert dtype_name(torch.half) == "float16"


def test_recorder_keeps_a_call_that_raised_apart() -> None:
    x = torch.ones(2, 3)
    with OpRecorder() as recorder, pytest.raises(RuntimeError):
        torch.mm(x, x)
    assert recorder.raised == {"aten::mm": {"float32"}}
    assert "aten::mm" not in recorder.counts


def test_outcome_of_no_reports_is_error() -> None:
    assert outcome([]) == "error"
