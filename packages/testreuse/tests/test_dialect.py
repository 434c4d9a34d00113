"""torch-spyre's config dialect runs unchanged: one config written as its users write them, run end to end on the
fallback device; fields testreuse cannot honour are refused with one line naming the field and why."""

from __future__ import annotations

import json
import os
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from testreuse import comments
from testreuse.errors import ConfigError
from testreuse.loader import load_plan, read_config
from testreuse.rules import name_matches
from testreuse.validate import missing_reasons

BACKENDS = Path(__file__).resolve().parent / "backends"

UPSTREAM = """
import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_modules import module_db, modules
from torch.testing._internal.common_utils import TestCase, run_tests

_OPS = [op for op in op_db if op.name in ("add", "mul")]
_SEEDED = torch.rand(3, generator=torch.Generator().manual_seed(42))


class TestDialect(TestCase):
    @dtypes(torch.float32, torch.int64)
    def test_fill(self, device, dtype):
        self.assertEqual(torch.zeros(4, device=device, dtype=dtype).fill_(2).cpu(), torch.full((4,), 2, dtype=dtype))

    @dtypes(torch.float32)
    def test_widened(self, device, dtype):
        self.assertEqual(torch.ones(2, device=device, dtype=dtype).sum().item(), 2)

    @dtypes(torch.float64)
    def test_close(self, device, dtype):
        self.assertEqual(torch.tensor(1.0, device=device, dtype=dtype).cpu(), torch.tensor(1.05, dtype=dtype))

    @ops(_OPS, allowed_dtypes=(torch.float32,))
    def test_op_close(self, device, dtype, op):
        self.assertEqual(torch.tensor(1.0, dtype=dtype), torch.tensor(1.05, dtype=dtype))

    @ops(_OPS, allowed_dtypes=(torch.float32,))
    def test_op_runs(self, device, dtype, op):
        sample = next(iter(op.sample_inputs(device, dtype)))
        op(sample.input, *sample.args, **sample.kwargs)

    @modules([info for info in module_db if info.name == "nn.Linear"], allowed_dtypes=(torch.float32,))
    def test_module(self, device, dtype, module_info, training):
        self.assertIn(module_info.name, ("nn.Linear", "nn.ReLU"))

    def test_grad_off(self, device):
        self.assertFalse(torch.is_grad_enabled())

    def test_seeded(self, device):
        self.assertEqual(torch.rand(3), _SEEDED, atol=0, rtol=0)

    def test_compare_on_cpu(self, device):
        self.assertEqual(torch.ones(2, device=device), torch.ones(2), exact_device=True)

    def test_compare_exact_device(self, device):
        self.assertEqual(torch.ones(2, device=device), torch.ones(2), exact_device=True)

    def test_tagged(self, device):
        self.assertTrue(torch.ones(1, device=device).bool().item())


class TestModuleLike(TestCase):
    def test_forward(self, device):
        self.assertTrue(True)

    def test_backward(self, device):
        self.assertTrue(True)


instantiate_device_type_tests(TestDialect, globals())
instantiate_device_type_tests(TestModuleLike, globals())

if __name__ == "__main__":
    run_tests()
"""

DEVICE_OWN = """
from torch.testing._internal.common_utils import TestCase


class TestOwn(TestCase):
    def test_own(self):
        self.assertTrue(True)
"""

# Written as a torch-spyre user writes a config: bare method names, a glob, reasons as comments, descriptions.
CONFIG = """\
test_suite_config:
  labels: [smoke]
  files:
    - path: ${TORCH_ROOT}/test/test_dialect.py
      unlisted_test_mode: skip
      tests:
        - names: [test_fill]
          mode: mandatory_success
          description: fill on every supported dtype
        - names: [test_widen]
          mode: mandatory_success
          edits:
            dtypes:
              include:
                - {name: float64, description: add coverage for a dtype of interest}
                - {name: float16}
        - names: [TestDialect::test_close, TestDialect::test_op_close, test_seeded]
          mode: mandatory_success
        - names: [test_op_runs]
          mode: mandatory_success
          edits: {ops: {include: [{name: sub, description: add coverage for an op of interest}]}}
        - names: [test_module]
          mode: mandatory_success
          edits: {modules: {include: [{name: nn.ReLU}]}}
        - names: [test_grad_off]
          mode: mandatory_success
          no_grad: true
        - names: [test_compare_on_cpu]
          mode: mandatory_success
          edits:
            functions:
              cpu_move: [{name: assertEqual}]
        # exact-device comparisons fail off the CPU; cpu_move is for test_compare_on_cpu only
        - names: [TestDialect::test_compare_exact_device]
          mode: xfail_strict  # issue 1002
        - names: [test_tagged]
          tags: [model_1]
        - names: ["*Module*::test_forward"]
          mode: mandatory_success
        - names: [TestModuleLike::test_backward]
          mode: xfail
    - path: ${TORCH_DEVICE_ROOT}/test_device_own.py
      unlisted_test_mode: mandatory_success
  global:
    supported_dtypes:
      - {name: float32, description: the native dtype}
      - {name: int64, force_xfail: true}
      - {name: float64, precision: {atol: 0.1, rtol: 0.0}}
    supported_ops:
      - {name: add, dtypes: [{name: float32, precision: {atol: 0.1, rtol: 0.0}}]}
      - {name: mul, force_xfail: true, description: rounds differently}
      - sub
    input_config: {seed: 42}
"""


@pytest.fixture
def spyre(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, extensions_dir: str):
    """The dialect config over an upstream tree and a device tree; returns a runner giving (result, records)."""
    root, device_root = tmp_path / "torch_root", tmp_path / "device_tests"
    (root / "test").mkdir(parents=True)
    device_root.mkdir()
    (root / "test" / "test_dialect.py").write_text(UPSTREAM)
    (device_root / "test_device_own.py").write_text(DEVICE_OWN)
    config = pytester.path / "spyre.yaml"
    config.write_text(CONFIG)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", extensions_dir)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(BACKENDS), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv("TORCH_DEVICE_ROOT", raising=False)

    def run(*extra: str) -> tuple[pytest.RunResult, dict[str, dict]]:
        results = pytester.path / "results.jsonl"
        results.unlink(missing_ok=True)
        args = ["-p", "no:cacheprovider", "--strict-markers", "--testreuse-config", str(config)]
        args += ["--torch-root", str(root), "--torch-device-root", str(device_root)]
        args += ["--testreuse-backend", "fallback_backend:load", "--testreuse-results", str(results), *extra]
        result = pytester.runpytest_subprocess(*args, timeout=600)
        lines = results.read_text().splitlines() if results.exists() else []
        return result, {json.loads(line)["nodeid"].rsplit("::", 1)[1]: json.loads(line) for line in lines}

    run.junit = pytester.path / "junit.xml"
    run.config = config
    return run


def test_a_torch_spyre_config_runs_unchanged(spyre) -> None:
    result, records = spyre("-rA", f"--junitxml={spyre.junit}")
    got = {name: r["outcome"] for name, r in records.items() if not name.startswith("test_module")}
    assert {(r["module"], r["outcome"]) for name, r in records.items() if name.startswith("test_module")} == {
        ("nn.Linear", "passed"),
        ("nn.ReLU", "passed"),  # added by edits.modules.include
    }
    assert got == {
        "test_fill_fallbackdev_float32": "passed",
        "test_fill_fallbackdev_int64": "xpassed",  # force_xfail on supported_dtypes int64
        "test_widened_fallbackdev_float32": "passed",  # `test_widen`: a prefix of the method name, any class
        "test_widened_fallbackdev_float64": "passed",  # added by edits.dtypes.include
        "test_widened_fallbackdev_float16": "deselected",  # added, but the device does not support it
        "test_close_fallbackdev_float64": "passed",  # supported_dtypes precision
        "test_op_close_add_fallbackdev_float32": "passed",  # supported_ops dtypes precision
        "test_op_close_mul_fallbackdev_float32": "xfailed",  # force_xfail on supported_ops mul
        "test_op_runs_add_fallbackdev_float32": "passed",
        "test_op_runs_mul_fallbackdev_float32": "xpassed",  # force_xfail on mul
        "test_op_runs_sub_fallbackdev_float32": "passed",  # added by edits.ops.include; a bare supported op
        "test_seeded_fallbackdev": "passed",  # input_config.seed after torch's own setUp seeding
        "test_grad_off_fallbackdev": "passed",  # no_grad
        "test_compare_on_cpu_fallbackdev": "passed",  # cpu_move of assertEqual
        "test_compare_exact_device_fallbackdev": "xfailed",  # not moved: the patch was this instance's only
        "test_tagged_fallbackdev": "passed",  # no mode: mandatory_success
        "test_forward_fallbackdev": "passed",  # glob *Module*::test_forward
        "test_backward_fallbackdev": "xpassed",  # xfail with no reason: accepted with a warning
        "test_own": "passed",  # ${TORCH_DEVICE_ROOT}
    }
    assert records["test_compare_exact_device_fallbackdev"]["reason"] == (
        "exact-device comparisons fail off the CPU; cpu_move is for test_compare_on_cpu only; issue 1002"
    )  # the comment above the entry, then the one trailing its `mode:` line
    assert records["test_backward_fallbackdev"]["reason"] == "none given"
    line = next(i for i, text in enumerate(CONFIG.splitlines(), 1) if "TestModuleLike::test_backward" in text)
    warning = f"spyre.yaml:{line}:11: test_suite_config.files[0].tests[10]: mode xfail has no reason"
    assert len([text for text in result.outlines if warning in text]) == 1, result.outlines
    assert records["test_fill_fallbackdev_int64"]["reason"] == "force_xfail on dtype int64 (supported_dtypes)"
    line = next(i for i, text in enumerate(CONFIG.splitlines(), 1) if "mul, force_xfail" in text)
    column = CONFIG.splitlines()[line - 1].index("true") + 1
    assert records["test_op_close_mul_fallbackdev_float32"]["rule"].endswith(f"spyre.yaml:{line}:{column}")
    assert records["test_tagged_fallbackdev"]["tags"] == ["model_1"]
    properties = {
        (case.get("name"), prop.get("name"), prop.get("value"))
        for case in ET.parse(spyre.junit).iter("testcase")
        for prop in case.iter("property")
    }
    assert ("test_tagged_fallbackdev", "testreuse_tags", "model_1") in properties
    assert result.ret == pytest.ExitCode.OK


def test_tags_are_marks(spyre) -> None:
    result, records = spyre("-m", "model_1")
    assert [name for name, r in records.items() if r["outcome"] == "passed"] == ["test_tagged_fallbackdev"]
    assert result.parseoutcomes()["passed"] == 1


def test_warnings_as_errors_make_a_reasonless_entry_a_usage_error(spyre) -> None:
    result, records = spyre("-W", "error::pytest.PytestConfigWarning")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert records == {}
    line = next(i for i, text in enumerate(CONFIG.splitlines(), 1) if "TestModuleLike::test_backward" in text)
    assert [text for text in result.errlines if text.startswith("ERROR")] == [
        f"ERROR: {spyre.config}:{line}:11: test_suite_config.files[0].tests[10]: mode xfail has no reason (no "
        "`reason:` or comment): its cases record 'none given'"
    ]


def write_config(tmp_path: Path, body: str) -> Path:
    (tmp_path / "test").mkdir(exist_ok=True)
    (tmp_path / "test" / "test_x.py").write_text(UPSTREAM)
    config = tmp_path / "c.yaml"
    config.write_text(f"test_suite_config:\n  files:\n    - path: ${{TORCH_ROOT}}/test/test_x.py\n{body}")
    return config


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            "ops: {include: [{name: add, sample_inputs_func: {args: [1]}}]}",
            "edits.ops.include[0].sample_inputs_func: unsupported field sample_inputs_func: ops.include adds an op_db",
        ),
        ("ops: {include: [{name: add, tags: [m]}]}", "unsupported field tags: marks go on the entry"),
        (
            "modules: {include: [{name: nn.Linear, module_path: torch.nn.Linear}]}",
            "unsupported field module_path: modules.include adds a module_db ModuleInfo by name only",
        ),
    ],
)
def test_unsupported_fields_are_one_line_each(tmp_path: Path, edit: str, message: str) -> None:
    config = write_config(tmp_path, f"      tests:\n        - names: [test_fill]\n          mode: skip\n"
                                    f"          reason: r\n          edits: {{{edit}}}\n")  # fmt: skip
    with pytest.raises(ConfigError) as caught:
        load_plan([config], tmp_path)
    assert len(str(caught.value).splitlines()) == 1
    assert message in str(caught.value)


def test_a_reason_comment_must_sit_directly_above_its_entry(tmp_path: Path) -> None:
    config = write_config(tmp_path, "      tests:\n        # a comment with a blank line after it\n\n"
                                    "        - names: [test_fill]\n          mode: xfail\n")  # fmt: skip
    plan = load_plan([config], tmp_path)
    assert [placed.rule.reason for fp in plan.files.values() for placed in fp.rules] == [None]
    (warning,) = missing_reasons(plan)
    assert str(warning).startswith(f"{config}:7:11: test_suite_config.files[0].tests[0]: mode xfail has no reason")


@pytest.fixture(params=["libyaml", "python"])
def reasons_of(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Each entry's reason after loading `tests` (the entries, dedented) under one file entry; the token stream that
    tells comments from text is libyaml's or PyYAML's own, as either may be installed."""
    if request.param == "libyaml" and not hasattr(yaml, "CSafeLoader"):
        pytest.skip("PyYAML without libyaml")
    monkeypatch.setattr(comments, "_TOKENS", yaml.CSafeLoader if request.param == "libyaml" else yaml.SafeLoader)

    def run(tests: str, after: str = "") -> list[str | None]:
        """`tests` as the block under `tests:`, or a flow list on that line when it starts with `[`."""
        config = tmp_path / "c.yaml"
        if tests.startswith("["):
            body = f" {tests}"
        else:
            body = "\n" + textwrap.indent(textwrap.dedent(tests).lstrip("\n"), " " * 8)
        config.write_text(f"test_suite_config:\n  files:\n    - path: x.py\n      tests:{body}{after}")
        return [rule.reason for rule in read_config(config)[0].test_suite_config.files[0].tests]

    return run


@pytest.mark.parametrize(
    ("tests", "reason"),
    [
        ("- names: [TestFoo::test_bar]  # on the names line\n  mode: xfail\n", "on the names line"),
        ("- names:  # on the bare names key\n    - TestFoo::test_bar\n  mode: xfail\n", "on the bare names key"),
        (
            "- names:\n    - TestFoo::test_baz   # issue 1002\n    - TestFoo::test_qux\n  mode: xfail\n",
            "issue 1002",
        ),
        ("- names:\n    - TestFoo::test_baz\n    - TestFoo::test_qux  # last item\n  mode: xfail\n", "last item"),
        (
            "- names: [TestFoo::test_bar]\n  mode: xfail  # xfail: Could not run 'aten::scatter.src_out'\n",
            "xfail: Could not run 'aten::scatter.src_out'",
        ),
        ("- names: [a]\n  mode: xfail\n  tags: [model_1]  # on another key\n", "on another key"),
        ("- names: [a]\n  mode: xfail\n  only:\n    ops: [add]  # on a nested key\n", "on a nested key"),
        (
            "- names: [a]\n  mode: xfail\n  only: {ops: [add],\n         dtypes: [float32]}  # after the brace\n",
            "after the brace",
        ),
        ("- {names: [a], mode: xfail}  # a flow entry\n", "a flow entry"),
        ("- names: [a]  #   ##  hashes and spaces  \n  mode: xfail  #\n", "##  hashes and spaces"),
        ("- names: [a]  # one\n  mode: xfail  # two\n  labels: [x]  # three\n", "one; two; three"),
        ("- names: [a]  # a comment\n  mode: xfail\n  reason: the field wins\n", "the field wins"),
        ("- names: [a]  # blank fields take comments\n  mode: xfail\n  reason: ''\n", "blank fields take comments"),
    ],
)
def test_a_comment_trailing_any_line_of_an_entry_is_its_reason(reasons_of, tests: str, reason: str) -> None:
    assert reasons_of(tests) == [reason]


def test_comments_above_and_trailing_join_in_line_order(reasons_of) -> None:
    tests = """
        # fails on the device:
        # scatter is missing
        - names:
            - TestFoo::test_baz   # issue 1002
            - TestFoo::test_qux
          mode: xfail  # xfail: Could not run 'aten::scatter.src_out'
        """
    assert reasons_of(tests) == [
        "fails on the device: scatter is missing; issue 1002; xfail: Could not run 'aten::scatter.src_out'"
    ]


@pytest.mark.parametrize(
    ("tests", "reason"),
    [
        ('- names: ["test_a#b"]\n  mode: xfail\n', None),
        ("- names: ['x # y']\n  mode: xfail  # real\n", "real"),
        ("- names: [a]\n  mode: xfail\n  reason: 'x # y'\n", "x # y"),
        ('- names: [a]\n  mode: xfail\n  reason: "x # y"  # not taken: the field wins\n', "x # y"),
        ('- names: [a]\n  description: "d # e"  # real\n  mode: xfail\n', "real"),
        ('- names: [a]\n  description: "one\n    # still text"  # real\n  mode: xfail\n', "real"),
        ("- names: [a]\n  description: |\n    # text, not a comment\n    more\n  mode: xfail\n", None),
        ("- names: [a]\n  description: >-\n    text # not a comment\n- names: [b]\n  mode: xfail\n", None),
    ],
)
def test_a_hash_inside_a_scalar_is_no_comment(reasons_of, tests: str, reason: str | None) -> None:
    assert reasons_of(tests)[0] == reason


def test_comments_of_the_next_entry_or_key_are_not_taken(reasons_of) -> None:
    tests = """
        - names: [a]
          mode: xfail
        # above b
        - names: [b]  # trailing b
          mode: xfail
        - names:
            - c
            # - d  (a name commented out, not a reason)
          mode: xfail
        - names: [e]
          mode: xfail
        """
    after = "    - path: y.py  # the next file's\n      unlisted_test_mode: skip  # the next file's\n"
    assert reasons_of(tests, after) == [None, "above b; trailing b", None, None]


def test_a_line_two_flow_entries_share_gives_its_comment_to_the_later(reasons_of) -> None:
    assert reasons_of("[{names: [a], mode: xfail}, {names: [b], mode: xfail}]  # b's\n") == [None, "b's"]
    two_lines = "[{names: [a], mode: xfail},  # a's\n        {names: [b], mode: xfail}]  # b's\n"
    assert reasons_of(two_lines) == ["a's", "b's"]


def test_device_root_unset_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCH_DEVICE_ROOT", raising=False)
    config = tmp_path / "c.yaml"
    config.write_text("test_suite_config:\n  files:\n    - path: ${TORCH_DEVICE_ROOT}/test_x.py\n")
    with pytest.raises(ConfigError, match=r"\$\{TORCH_DEVICE_ROOT\} is not set: pass --torch-device-root"):
        load_plan([config], tmp_path)


@pytest.mark.parametrize(
    ("name", "key", "matches"),
    [
        ("TestFoo::test_x", "TestFoo::test_x", True),
        ("TestFoo::test_x", "TestFoo::test_x_y", False),  # ours stays exact
        ("test_x", "TestBar::test_x_y", True),  # torch-spyre's: prefix of the method, any class
        ("test_x", "TestBar::a_test_x", False),
        ("test_(a|b)$", "TestBar::test_b", True),
        ("*TestModule*::test_forward", "NewTestModuleX::test_forward", True),
        ("*TestModule*::test_forward", "NewTestModuleX::test_forward_2", False),
        ("TestModule*::test_forward", "TestModuleX::test_forward", True),
        ("test_view_*", "TestViews::test_view_t", True),
        ("TestFoo::test_.*", "TestFoo::test_y", True),  # a regex: `.*` is no glob
        ("TestFoo::test_.*", "TestFooBar::test_y", False),
    ],
)
def test_name_forms(name: str, key: str, matches: bool) -> None:
    assert name_matches(name, key) is matches
