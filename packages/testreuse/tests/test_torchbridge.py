"""The torch internals testreuse relies on, checked directly: a torch upgrade that moves one fails here, loudly."""

from __future__ import annotations

import copy
import inspect
import os

import pytest
import torch
from testreuse import torchbridge
from testreuse.capabilities import ResolvedCapabilities
from torch.testing._internal import common_device_type as cdt
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_modules import module_db, modules
from torch.testing._internal.common_utils import TestCase, parametrize, subtest


def test_set_test_configs_takes_the_three_knobs() -> None:
    params = inspect.signature(cdt.PrivateUse1TestBase.set_test_configs).parameters
    assert {"op_overrides", "op_allowlist", "test_exclusions"} <= set(params)
    assert cdt.PYTORCH_TESTING_DEVICE_ONLY_FOR_KEY == torchbridge.ONLY_FOR_KEY


def test_dtypes_if_narrows_an_opinfo_per_device() -> None:
    op = copy.deepcopy(next(o for o in op_db if o.name == "add"))
    op.dtypesIf["cpu"] = {torch.float16}
    assert op.supported_dtypes("cpu") == {torch.float16}


def test_tolerance_override_is_a_decorate_info() -> None:
    (info,) = torchbridge._tolerance_overrides([torchbridge.Tolerance("TestX", "test_y", "add", "float32", 0.1, 0.2)])[
        "add"
    ]
    assert info.is_active("TestX", "test_y", torchbridge.backend_name(), torch.float32, {})
    decorated = info.decorators[0](lambda: None)
    assert decorated.tolerance_overrides == {torch.float32: cdt.tol(atol=0.1, rtol=0.2)}


def test_param_kwargs_record_is_read_from_instantiated_tests() -> None:
    add = [o for o in op_db if o.name == "add"]
    linear = [m for m in module_db if m.name == "nn.Linear"]

    class TestProbe(TestCase):
        @cdt.ops(add, allowed_dtypes=(torch.float32,))
        def test_op(self, device, dtype, op):
            pass

        @cdt.dtypes(torch.int64)
        def test_dtype(self, device, dtype):
            pass

        @modules(linear, allowed_dtypes=(torch.float64,))
        def test_module(self, device, dtype, module_info, training):
            pass

        def test_plain(self, device):
            pass

        @parametrize("reduce", ["sum", "mean"])
        @parametrize("sparse_grad", [False, True])
        @parametrize("fn", [subtest(torch.add, name="add"), object()])
        @cdt.dtypes(torch.float32)
        def test_cell(self, device, dtype, reduce, sparse_grad, fn):
            pass

    scope = {"TestProbe": TestProbe}
    cdt.instantiate_device_type_tests(TestProbe, scope, only_for="cpu")
    cls = scope["TestProbeCPU"]
    found = {name: torchbridge.case_params(cls, name) for name in dir(cls) if name.startswith("test_")}
    assert found["test_op_add_cpu_float32"].op.full_name == "add"
    assert found["test_op_add_cpu_float32"].dtypes == ("float32",)
    assert found["test_dtype_cpu_int64"].dtypes == ("int64",)
    (module_case,) = [p for name, p in found.items() if name.startswith("test_module")][:1]
    assert (module_case.module, module_case.dtypes) == ("nn.Linear", ("float64",))
    assert {p.generic_class for p in found.values()} == {"TestProbe"}
    assert found["test_plain_cpu"].generic_test == "test_plain"
    assert found["test_plain_cpu"].params == ()
    assert module_case.params in ((("training", "False"),), (("training", "True"),))
    cells = {p.params for name, p in found.items() if name.startswith("test_cell")}
    assert {p.generic_test for name, p in found.items() if name.startswith("test_cell")} == {"test_cell"}
    assert (("fn", "add"), ("reduce", "mean"), ("sparse_grad", "True")) in cells
    assert (("reduce", "sum"), ("sparse_grad", "False")) in cells  # an object's text is its address: left out
    assert len(cells) == 8


@pytest.mark.parametrize("before", [None, "cpu"])
def test_prepare_is_undone_by_its_preparation(monkeypatch: pytest.MonkeyPatch, before: str | None) -> None:
    """The device-only switch lasts for collection only; narrowed dtypes and tolerances for the session only."""
    if before is None:
        monkeypatch.delenv(torchbridge.ONLY_FOR_KEY, raising=False)
    else:
        monkeypatch.setenv(torchbridge.ONLY_FOR_KEY, before)
    name = torchbridge.backend_name()
    add, sin = (next(o for o in op_db if o.full_name == n) for n in ("add", "sin"))
    untouched = [(op, copy.copy(op.dtypesIf.get(name))) for op in (add, sin)]
    capabilities = ResolvedCapabilities(dtypes=frozenset({"float32", "int64"}), ops={"add": frozenset({"float32"})})
    tolerance = torchbridge.Tolerance("TestX", "test_y", "add", "float32", 0.1, 0.2)
    preparation = torchbridge.prepare(capabilities, [tolerance])
    assert os.environ[torchbridge.ONLY_FOR_KEY] == "privateuse1"
    assert (add.dtypesIf[name], sin.dtypesIf[name]) == ({torch.float32}, set())
    assert set(cdt.PrivateUse1TestBase.op_overrides) == {"add"}

    preparation.end_collection()
    assert os.environ.get(torchbridge.ONLY_FOR_KEY) == before
    assert add.dtypesIf[name] == {torch.float32}  # the run still sees the device's dtypes

    preparation.close()
    preparation.close()
    assert [(op, op.dtypesIf.get(name)) for op, _ in untouched] == untouched
    assert cdt.PrivateUse1TestBase.op_overrides is None
