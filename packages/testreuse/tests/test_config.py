"""The config layer: YAML positions, strict typing, paths, merging, capabilities and semantic checks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from testreuse.errors import ConfigError
from testreuse.loader import load_plan, read_config
from testreuse.model import NONE_GIVEN, Mode
from testreuse.rules import Case, decide
from testreuse.validate import check_plan, missing_reasons, validate


def problems_of(path: Path, root: Path) -> list[str]:
    """Every problem the loader and the semantic checks report, as the one-line strings users see."""
    try:
        found = check_plan(load_plan([path], root))
    except ConfigError as exc:
        found = exc.problems
    assert found, "expected problems"
    return [str(p) for p in found]


def test_duplicate_key_cites_both_lines(write, tmp_path: Path, torch_root: Path) -> None:
    cfg = write(
        tmp_path / "c.yaml",
        """
        test_suite_config:
          files:
            - path: ${TORCH_ROOT}/test/test_small.py
              unlisted_test_mode: skip
              unlisted_test_mode: xfail
        """,
    )
    assert problems_of(cfg, torch_root) == [
        f"{cfg}:5:7: test_suite_config.files[0].unlisted_test_mode: duplicate key (first defined at line 4)"
    ]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("files: []\n  bogus: 1", ":3:3: test_suite_config.bogus: unknown key"),
        ("files: {path: x}", ":2:10: test_suite_config.files: Input should be a valid list"),
        (
            "files: [{path: '${TORCH_ROOT}/test/test_small.py', unlisted_test_mode: sometimes}]",
            ":2:74: test_suite_config.files[0].unlisted_test_mode: Input should be 'mandatory_success', 'xfail', "
            "'xfail_strict' or 'skip'",
        ),
        (
            "global: {supported_dtypes: [{name: flaot32}]}",
            ":2:38: test_suite_config.global.supported_dtypes[0].name: 'flaot32' is not a torch dtype",
        ),
        ("files: [{path: a, tests: [{names: ['(unclosed'], mode: mandatory_success}]}]", "is neither Class::test"),
        ("global: {capabilities: {command: a, file: b}}", "give exactly one of command or file"),
    ],
)
def test_model_errors_carry_position_and_path(
    write, tmp_path: Path, torch_root: Path, body: str, expected: str
) -> None:
    cfg = write(tmp_path / "c.yaml", f"test_suite_config:\n  {body}\n")
    (problem,) = problems_of(cfg, torch_root)
    assert problem.startswith(str(cfg))
    assert expected in problem


def test_yaml_syntax_error_is_one_located_line(write, tmp_path: Path, torch_root: Path) -> None:
    cfg = write(tmp_path / "c.yaml", "test_suite_config:\n  files: [\n")
    (problem,) = problems_of(cfg, torch_root)
    assert problem.startswith(f"{cfg}:3:1: invalid YAML")


def test_semantic_checks_use_op_db_and_the_upstream_syntax_tree(write, tmp_path: Path, torch_root: Path) -> None:
    cfg = write(
        tmp_path / "c.yaml",
        """
        test_suite_config:
          files:
            - path: ${TORCH_ROOT}/test/test_small.py
              tests:
                - names: [TestSmall::test_gone, "TestSmall::test_op.*", "TestSmall::nothing.*"]
                  mode: mandatory_success
                  only: {ops: [addd, _refs.add]}  # a Python reference is named like any OpInfo
                  edits: {precision: [{op: add, dtype: float16, atol: 0.1, rtol: 0.1}]}
          global:
            supported_ops: [{name: add}, {name: nope}]
            supported_modules: [{name: nn.Linear}, {name: NoSuchModule}]
        """,
    )
    found = problems_of(cfg, torch_root)
    assert found == [
        f"{cfg}:5:19: test_suite_config.files[0].tests[0].names[0]: no test 'TestSmall::test_gone' upstream",
        f"{cfg}:5:65: test_suite_config.files[0].tests[0].names[2]: regex 'TestSmall::nothing.*' matches no test "
        "upstream",
        f"{cfg}:7:24: test_suite_config.files[0].tests[0].only.ops[0]: op 'addd' is not in op_db or python_ref_db",
        f"{cfg}:10:41: test_suite_config.global.supported_ops[1].name: op 'nope' is not in op_db or python_ref_db",
        f"{cfg}:11:51: test_suite_config.global.supported_modules[1].name: module 'NoSuchModule' is not in module_db",
    ]


def test_paths_expand_torch_root_and_globs(write, tmp_path: Path, torch_root: Path) -> None:
    write(torch_root / "test" / "test_other.py", "class TestOther:\n    def test_x(self): pass\n")
    cfg = write(tmp_path / "c.yaml", "test_suite_config:\n  files: [{path: '${TORCH_ROOT}/test/test_*.py'}]\n")
    plan = load_plan([cfg], torch_root)
    assert sorted(p.name for p in plan.files) == ["test_other.py", "test_small.py"]
    for body, message in (
        ("${TORCH_ROOT}/test/none_*.py", "matches no .py file"),
        ("${HOME}/x.py", "unknown variable"),
    ):
        bad = write(tmp_path / "bad.yaml", f"test_suite_config:\n  files: [{{path: '{body}'}}]\n")
        (problem,) = problems_of(bad, torch_root)
        assert f"{bad}:2:18: test_suite_config.files[0].path: " in problem
        assert message in problem


def test_a_globbed_entry_checks_names_against_every_file_it_matched(write, tmp_path: Path, torch_root: Path) -> None:
    write(torch_root / "test" / "test_other.py", "class TestOther:\n    def test_x(self): pass\n")
    cfg = write(
        tmp_path / "c.yaml",
        """
        test_suite_config:
          files:
            - path: ${TORCH_ROOT}/test/test_*.py
              tests:
                - {names: ["TestOther::.*", TestSmall::test_fill], mode: mandatory_success}
                - {names: ["TestSmall::.*"], mode: xfail, reason: r}
        """,
    )
    plan = load_plan([cfg], torch_root)
    assert check_plan(plan) == []
    assert {p.order for f in plan.files.values() for p in f.rules} == {0, 1}


def test_an_entry_without_a_reason_loads_and_its_cases_record_none_given(
    write, tmp_path: Path, torch_root: Path
) -> None:
    cfg = write(
        tmp_path / "c.yaml",
        """
        test_suite_config:
          files:
            - path: ${TORCH_ROOT}/test/test_small.py
              tests:
                - {names: [TestSmall::test_plain], mode: xfail}
                - {names: [TestSmall::test_fill], mode: skip, reason: "  "}
                - {names: [TestSmall::test_op]}
        """,
    )
    plan = load_plan([cfg], torch_root)
    (file_plan,) = plan.files.values()
    reasons = [decide(plan, file_plan, Case("TestSmall", test)).reason for test in ("test_plain", "test_fill")]
    assert reasons == [NONE_GIVEN, NONE_GIVEN] == ["none given"] * 2
    assert decide(plan, file_plan, Case("TestSmall", "test_op", "add", ("float32",))).reason == "listed"
    assert [str(p) for p in missing_reasons(plan)] == [
        f"{cfg}:5:11: test_suite_config.files[0].tests[0]: mode xfail has no reason (no `reason:` or comment): its "
        "cases record 'none given'",
        f"{cfg}:6:11: test_suite_config.files[0].tests[1]: mode skip has no reason (no `reason:` or comment): its "
        "cases record 'none given'",
    ]
    assert check_plan(plan) == []  # a warning, not a problem
    with pytest.raises(ConfigError) as caught:
        validate([cfg], torch_root, strict=True)
    assert [str(p) for p in caught.value.problems] == [
        f"{cfg}:{line}:11: test_suite_config.files[0].tests[{index}]: mode {mode} needs a reason: a `reason:` or a "
        "comment above the entry or on its lines"
        for line, index, mode in ((5, 0, "xfail"), (6, 1, "skip"))
    ]


def test_default_unlisted_mode_is_the_documented_one(write, tmp_path: Path, torch_root: Path) -> None:
    cfg = write(tmp_path / "c.yaml", "test_suite_config:\n  files: [{path: '${TORCH_ROOT}/test/test_small.py'}]\n")
    (plan,) = load_plan([cfg], torch_root).files.values()
    schema_default = read_config(cfg)[0].model_json_schema()["$defs"]["FileEntry"]["properties"]
    assert plan.unlisted_mode is Mode.skip
    assert schema_default["unlisted_test_mode"]["default"] == "skip"


def test_merge_precedence(write, tmp_path: Path, torch_root: Path) -> None:
    base = write(
        tmp_path / "configs" / "10-base.yaml",
        """
        test_suite_config:
          labels: [trunk]
          files:
            - path: ${TORCH_ROOT}/test/test_small.py
              unlisted_test_mode: xfail_strict
              tests: [{names: [TestSmall::test_fill], mode: xfail, reason: base}]
          global: {supported_dtypes: [{name: float32}], supported_ops: [{name: add}]}
        """,
    )
    write(
        tmp_path / "configs" / "20-device.yaml",
        """
        test_suite_config:
          labels: [nightly, trunk]
          files:
            - path: ${TORCH_ROOT}/test/test_small.py
              tests: [{names: [TestSmall::test_fill], mode: skip, reason: overlay}]
          global: {supported_dtypes: [{name: float16}]}
        """,
    )
    plan = load_plan([tmp_path / "configs"], torch_root)
    (file_plan,) = plan.files.values()
    assert plan.labels == ("trunk", "nightly")
    assert file_plan.unlisted_mode is Mode.xfail_strict  # the overlay did not set it
    assert [p.rule.reason for p in file_plan.rules] == ["base", "overlay"]
    assert plan.capabilities.dtypes == {"float16"}
    assert plan.capabilities.ops == {"add": None}
    assert plan.sources == [base, tmp_path / "configs" / "20-device.yaml"]


def test_capabilities_from_a_command_and_a_file_inline_keys_win(write, tmp_path: Path, torch_root: Path) -> None:
    write(
        tmp_path / "caps.yaml",
        """
        supported_dtypes: [{name: float32}, {name: bfloat16}]
        supported_ops: [{name: add, dtypes: [{name: float32}]}, {name: _to_copy}]
        version: 3
        """,
    )
    write(tmp_path / "export.py", "print(open('caps.yaml').read())")
    for source in ("{file: caps.yaml}", f"{{command: '{sys.executable} export.py'}}"):
        cfg = write(
            tmp_path / "c.yaml",
            f"test_suite_config:\n  global:\n    capabilities: {source}\n    supported_dtypes: [{{name: float16}}]\n",
        )
        caps = load_plan([cfg], torch_root).capabilities
        assert caps.dtypes == {"float16"}
        assert caps.ops == {"add": frozenset({"float32"}), "_to_copy": None}
        assert caps.exported_ops == {"add", "_to_copy"}
        assert check_plan(load_plan([cfg], torch_root)) == []  # exported kernel names need not be OpInfos


def test_failing_capability_command_is_located(write, tmp_path: Path, torch_root: Path) -> None:
    write(tmp_path / "export.py", "import sys; sys.exit('no device')")
    command = f"{sys.executable} export.py"
    cfg = write(tmp_path / "c.yaml", f"test_suite_config:\n  global:\n    capabilities: {{command: '{command}'}}\n")
    (problem,) = problems_of(cfg, torch_root)
    assert problem == f"{cfg}:3:19: test_suite_config.global.capabilities.command: exited with 1: no device"


def test_bad_export_is_reported_in_the_export(write, tmp_path: Path, torch_root: Path) -> None:
    write(tmp_path / "caps.yaml", "supported_ops: [{name: add, dtypes: [{name: float33}]}]\n")
    cfg = write(tmp_path / "c.yaml", "test_suite_config:\n  global:\n    capabilities: {file: caps.yaml}\n")
    (problem,) = problems_of(cfg, torch_root)
    assert problem == f"{tmp_path / 'caps.yaml'}:1:45: supported_ops[0].dtypes[0].name: 'float33' is not a torch dtype"
