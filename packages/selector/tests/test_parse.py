"""Facts the parser must read from the embedded tree, without importing it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testselect.index.parse import parse_source
from testselect.index.records import FileRecord, ParseError

from .conftest import EMBEDDED


def _parse(name: str) -> FileRecord:
    path = EMBEDDED / "test" / name
    return parse_source(name, path.read_bytes())


def _test(record: FileRecord, name: str):
    return next(t for t in record.tests if t.name == name)


def test_dtypes_and_restrictions_in_view_ops() -> None:
    record = _parse("test_view_ops.py")
    real = _test(record, "test_view_as_real")
    assert real.node_id == "test_view_ops.py::TestViewOps::test_view_as_real"
    assert real.params["dtypes"] == ["complex128", "complex64"]  # *complex_types(), read without torch
    assert "complex" in real.features
    assert "torch.view_as_real" in real.calls
    new = _test(record, "test_view_dtype_new")
    assert {"name": "onlyNativeDeviceTypes", "args": ""} in new.params["restrictions"]
    assert {"bfloat16", "bool", "float16", "complex64"} <= set(new.params["dtypes"])  # module-level _all_dtypes
    assert "test_view_ops.py::TestViewOps::is_view_of" not in {t.node_id for t in record.tests}


def test_device_generic_class() -> None:
    record = _parse("test_view_ops.py")
    (cls,) = record.classes
    assert cls.name == "TestViewOps"
    assert cls.device_generic
    assert cls.instantiations[0]["function"] == "instantiate_device_type_tests"


def test_ops_list_expression_and_static_names() -> None:
    record = _parse("test_ops.py")
    compare = _test(record, "test_compare_cpu")
    assert compare.params["ops"]["expr"] == "op_db"
    assert compare.params["ops"]["allowed_dtypes"] == ["float32"]
    view = _test(record, "test_embedded_view_shares_storage")
    assert view.params["ops"]["expr"] == "_view_ops"
    assert view.params["ops"]["source"] == "op_db"
    assert {"view_as_real", "transpose", "unfold"} <= set(view.params["ops"]["names"])
    assert _test(record, "test_compare_cpu").summary.startswith("Runs the op on the device under test")


def test_modules_and_dtypes_if() -> None:
    modules = _test(_parse("test_modules.py"), "test_forward")
    assert modules.params["modules"]["expr"] == "module_db"
    indexing = _parse("test_indexing.py")
    (special,) = [t for t in indexing.tests if "dtypesIfCPU" in t.decorators]
    assert special.params["dtypes_if"]["cpu"] == ["float32", "float64"]


def test_instantiation_args_and_features_from_source() -> None:
    source = b'''
import torch
from torch.testing._internal.common_utils import TestCase, parametrize, instantiate_parametrized_tests

class Base(TestCase):
    pass

class TestThing(Base):
    """not a test: the class docstring"""

    @onlyCUDA
    @deviceCountAtLeast(2)
    @largeTensorTest("8GB")
    @parametrize("n", [1, 2])
    @dtypes(torch.double, torch.cfloat)
    def test_grad(self, device, dtype, n):
        """Gradients flow through the thing.

        More words."""
        x = torch.ones(3, requires_grad=True)
        torch.compile(lambda y: y * 2)(x).sum().backward()
        x.to_sparse()

    def helper(self):
        pass

class NotATest:
    def test_nothing(self):
        pass

instantiate_device_type_tests(TestThing, globals(), only_for=("cpu", "cuda"), except_for="meta")
'''
    record = parse_source("test_thing.py", source)
    (test,) = record.tests
    assert test.summary == "Gradients flow through the thing."
    assert test.params["dtypes"] == ["complex64", "float64"]
    assert [r["name"] for r in test.params["restrictions"]] == ["onlyCUDA", "deviceCountAtLeast", "largeTensorTest"]
    assert test.params["parametrize"] == [{"names": "n", "values": "[1, 2]"}]
    assert test.features == ["autograd", "complex", "dynamo", "float64", "inductor", "multi_device", "sparse"]
    thing = next(c for c in record.classes if c.name == "TestThing")
    assert thing.device_generic
    assert thing.instantiations[0]["kwargs"] == {"except_for": "'meta'", "only_for": "('cpu', 'cuda')"}
    assert not next(c for c in record.classes if c.name == "Base").device_generic


def test_hash_covers_decorators_and_only_that_test() -> None:
    before = _parse("test_view_ops.py")
    text = (EMBEDDED / "test" / "test_view_ops.py").read_text(encoding="utf-8")
    edited = text.replace("@dtypes(torch.float32, torch.float64)\n", "@dtypes(torch.float32)\n", 1)
    assert edited != text
    after = parse_source("test_view_ops.py", edited.encode())
    changed = {t.name for t, u in zip(before.tests, after.tests, strict=True) if t.content_hash != u.content_hash}
    assert changed == {"test_view_as_complex"}


@pytest.mark.parametrize(
    ("source", "line"),
    [(b"class A(TestCase):\n    def test_x(self):\n        return (\n", 3), (b"x = 1\n\xff\xfe\n", 2)],
)
def test_unparsable_names_file_and_line(source: bytes, line: int) -> None:
    with pytest.raises(ParseError) as raised:
        parse_source("test_bad.py", source)
    assert raised.value.line == line
    assert str(raised.value).startswith(f"test_bad.py:{line}: ")


_PIECES = st.sampled_from(
    [
        "class T(TestCase):\n",
        "    @dtypes(torch.float32, *all_types_and(torch.half))\n",
        "    @ops([op for op in op_db if op.name in ('add', 'sub')], dtypes=OpDTypes.none)\n",
        "    @parametrize('x', [1, 2])\n",
        "    def test_a(self, device):\n",
        "        x.backward()\n",
        "instantiate_device_type_tests(T, globals())\n",
        "    @onlyOn(['cuda'])\n",
        "def test_free(): pass\n",
        "x = (\n",
        ")\n",
        "    \n",
        "\t",
        "'''",
        "lambda: (yield)\n",
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_PIECES, st.text(max_size=20)), max_size=25), st.binary(max_size=8))
def test_fuzz_never_raises_anything_but_parse_error(pieces: list[str], tail: bytes) -> None:
    source = "".join(pieces).encode("utf-8", "surrogatepass") + tail
    try:
        record = parse_source("test_fuzz.py", source)
    except ParseError as exc:
        line = exc.line
    else:
        line = 1
        assert all(t.node_id.startswith("test_fuzz.py::") for t in record.tests)
    assert line >= 1


def test_deep_nesting_is_a_parse_error() -> None:
    depth = sys.getrecursionlimit() * 2
    with pytest.raises(ParseError):
        parse_source("test_deep.py", ("x = " + "(" * depth + ")" * depth + "\n").encode())


def test_no_torch_import(tmp_path: Path) -> None:

    code = (
        "import sys; from pathlib import Path; from testselect.index.build import index_tree;"
        "from testselect.index.store import Store;"
        f"s = Store.open(Path(sys.argv[1])); index_tree(Path({str(EMBEDDED)!r}), s); s.close();"
        "import testselect.similar; assert 'torch' not in sys.modules, 'torch imported'"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "index.sqlite")], check=False)
    assert done.returncode == 0
