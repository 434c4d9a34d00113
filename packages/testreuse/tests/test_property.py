"""Generated configs, valid and not: always one-line errors and a non-zero exit, never a traceback.

The documents follow the config's shape closely enough to get past the model into the checks that need a real tree
(test names against the upstream syntax tree, globs, op names), with wrong values, deep nesting and aliases mixed in.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from testreuse.cli import ExitCode, main
from testreuse.loader import read_config

KEYS = [
    "test_suite_config", "labels", "files", "path", "unlisted_test_mode", "tests", "names", "mode", "reason",
    "edits", "dtypes", "ops", "modules", "include", "exclude", "name", "global", "supported_dtypes",
    "supported_ops", "supported_modules", "capabilities", "command", "file", "precision", "atol", "rtol",
    "only", "samples", "shape", "bogus",
]  # fmt: skip
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False), st.sampled_from(
        ["skip", "xfail", "float32", "flaot32", "add", "TestSmall::test_fill", "(", "${TORCH_ROOT}/x.py", ""]
    ), st.text(max_size=8),
)  # fmt: skip
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)),
    max_leaves=40,
)


def maybe(valid: st.SearchStrategy, odds: int = 12) -> st.SearchStrategy:
    """`valid` with odds `odds` to 1, else any value at all: a document is wrong in few places, so most reach the
    checks that need the tree."""
    return st.sampled_from([True] * odds + [False]).flatmap(lambda keep: valid if keep else VALUES)


NAMES = st.sampled_from(
    ["TestSmall::test_fill", "TestSmall::test_op", "TestSmall::test_.*", "TestOther::test_x", "TestSmall::test_gone",
     "TestSmall::nothing.*", "Test.*::test_plain", "(", "TestSmall::test_op|TestOther::.*"]
)  # fmt: skip
PATHS = st.sampled_from(
    ["${TORCH_ROOT}/test/test_small.py"] * 4 + ["${TORCH_ROOT}/test/test_*.py", "${TORCH_ROOT}/test/test_broken.py",
     "${TORCH_ROOT}/test/missing.py", "torch_root/test/test_other.py", "${TORCH_ROOT}/**/*.py", "${HOME}/x.py"]
)  # fmt: skip
MODES = st.sampled_from(["mandatory_success"] * 4 + ["xfail", "xfail_strict", "skip", "sometimes"])
DTYPE_NAMES = st.sampled_from(["float32", "int64", "bfloat16", "bool", "flaot32"])
OP_NAMES = st.sampled_from(["add", "mul", "sin", "div.floor_rounding", "addd", "_to_copy"])
MODULE_NAMES = st.sampled_from(["nn.Linear", "nn.GRU", "NoSuchModule"])
DTYPE = st.fixed_dictionaries({"name": maybe(DTYPE_NAMES)})
NAMED = st.fixed_dictionaries({"name": maybe(st.one_of(OP_NAMES, MODULE_NAMES))})
SCOPE = st.fixed_dictionaries(
    {"ops": st.lists(OP_NAMES, min_size=1, max_size=2)},
    optional={"dtypes": st.lists(DTYPE_NAMES, max_size=2), "modules": st.lists(MODULE_NAMES, max_size=2)},
)
EDITS = st.fixed_dictionaries(
    {},
    optional={
        "dtypes": st.fixed_dictionaries({}, optional={"include": st.lists(DTYPE), "exclude": st.lists(DTYPE)}),
        "ops": st.fixed_dictionaries({}, optional={"exclude": st.lists(NAMED, max_size=2)}),
        "samples": st.fixed_dictionaries({"exclude": st.lists(st.fixed_dictionaries({"shape": st.just([5, 5])}))}),
        "precision": st.lists(
            st.fixed_dictionaries({"op": OP_NAMES, "dtype": DTYPE_NAMES, "atol": st.just(0.1), "rtol": st.just(0.0)}),
            max_size=2,
        ),
    },
)
RULE = st.fixed_dictionaries(
    {"names": maybe(st.lists(NAMES, min_size=1, max_size=3)), "mode": maybe(MODES)},
    optional={"reason": st.sampled_from(["why", "why", ""]), "only": maybe(SCOPE), "edits": maybe(EDITS)},
)
ENTRY = st.fixed_dictionaries(
    {"path": maybe(PATHS)},
    optional={"unlisted_test_mode": MODES, "tests": st.lists(maybe(RULE), min_size=1, max_size=3)},
)
GLOBAL = st.fixed_dictionaries(
    {},
    optional={
        "supported_dtypes": st.lists(DTYPE, max_size=3),
        "supported_ops": st.lists(st.fixed_dictionaries({"name": OP_NAMES}), max_size=3),
        "capabilities": st.sampled_from([{"file": "caps.yaml"}, {"file": "latin1.yaml"}, {"command": "x"}, {}]),
    },
)
SUITE = st.fixed_dictionaries(
    {"files": st.lists(ENTRY, min_size=1, max_size=3)}, optional={"labels": st.lists(st.sampled_from(["trunk", "x"]))}
).flatmap(lambda suite: st.one_of(st.just(suite), GLOBAL.map(lambda g: {**suite, "global": g})))
SHAPED = st.fixed_dictionaries({"test_suite_config": maybe(SUITE, odds=30)}).map(yaml.safe_dump)
NESTED = st.integers(1, 400).flatmap(
    lambda n: st.sampled_from(
        [
            "test_suite_config: " + "[" * n + "]" * n,
            "test_suite_config: " + "{a: " * n + "}" * n,
            "test_suite_config:\n" + "".join(f"{'  ' * (i + 1)}k:\n" for i in range(n)),
        ]
    )
)
ALIASED = st.sampled_from([2, 3, 8]).map(
    lambda n: "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}' if i else 'x'] * n)}]\n" for i in range(n))
)
# Comment text as users write it: letters, digits, punctuation (quotes and `#` too), symbols and spaces.
COMMENT = st.text(st.characters(categories=("L", "N", "P", "S"), include_characters=" "), max_size=12)


def _commented(document: tuple[str, list[tuple[int, str]]]) -> str:
    """Comments appended to some lines: a document as torch-spyre's users write them (a few stop being YAML)."""
    text, comments = document
    lines = text.split("\n")
    for index, comment in comments:
        lines[index % len(lines)] += f"  # {comment}"
    return "\n".join(lines)


COMMENTED = st.tuples(SHAPED, st.lists(st.tuples(st.integers(0, 99), COMMENT), max_size=4)).map(_commented)
DOCUMENTS = st.one_of(
    *[SHAPED] * 4, *[COMMENTED] * 2, VALUES.map(yaml.safe_dump), NESTED, ALIASED, st.text(max_size=60),
    st.just("test_suite_config:\n  labels: &a [*a]\n"),
)  # fmt: skip


REASONLESS = (
    "test_suite_config:\n  files:\n    - path: ${TORCH_ROOT}/test/test_small.py\n      tests:\n"
    "        - names: [TestSmall::test_fill]  # 'a # quoted' \"hash\"\n          mode: skip\n"
    "        - {names: [TestSmall::test_plain], mode: xfail}\n"
)


def test_generated_configs_give_one_line_errors_and_reach_the_tree_checks(
    tmp_path: Path, torch_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (torch_root / "test" / "test_other.py").write_text("class TestOther:\n    def test_x(self): pass\n")
    (torch_root / "test" / "test_broken.py").write_text("class TestBroken(:\n")
    (tmp_path / "caps.yaml").write_text("supported_dtypes: [{name: float32}]\n")
    (tmp_path / "latin1.yaml").write_bytes(b"supported_dtypes: [{name: caf\xe9}]\n")
    seen: Counter[str] = Counter()
    config = tmp_path / "fuzz.yaml"

    @settings(max_examples=500, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(text=DOCUMENTS, strict=st.booleans())
    @example(text=REASONLESS, strict=False)  # whether generation reaches a valid reasonless entry is chance
    @example(text=REASONLESS, strict=True)
    def check(text: str, strict: bool) -> None:
        config.write_text(text, encoding="utf-8")
        code = main(["validate", str(config), "--torch-root", str(torch_root), *(["--strict"] if strict else [])])
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err + captured.out
        if code == ExitCode.OK:
            assert captured.out.startswith("ok: ")
            warnings = captured.err.splitlines()
            assert not (strict and warnings)
            assert all(line.startswith(f"warning: {config}:") and "has no reason" in line for line in warnings)
            seen["ok"] += 1
            seen["no reason, warned"] += bool(warnings)
            return
        assert code == ExitCode.INVALID_CONFIG
        lines = captured.err.splitlines()
        assert lines
        sources = (f"error: {config}:", f"error: {tmp_path / 'latin1.yaml'}:")
        assert all(line.startswith(sources) for line in lines), lines
        text_of_errors = captured.err
        seen["upstream names"] += "upstream" in text_of_errors
        seen["catalog names"] += "is not in op_db" in text_of_errors or "is not in module_db" in text_of_errors
        seen["nesting"] += "nesting" in text_of_errors
        seen["aliases"] += "alias" in text_of_errors
        seen["no reason, refused"] += strict and "needs a reason" in text_of_errors

    check()
    kinds = ("ok", "upstream names", "catalog names", "nesting", "aliases", "no reason, warned", "no reason, refused")
    assert all(seen[kind] for kind in kinds), seen


NAMES_WRITTEN = st.lists(
    st.sampled_from(["TestFoo::test_bar", "test_a#b", "x # y", "TestFoo::test_[ab]#", "it's", "a: b"]),
    min_size=1,
    max_size=3,
)
TRAILING = st.one_of(st.none(), COMMENT)  # one line's trailing comment, or none


@st.composite
def commented_entry(draw: st.DrawFn) -> tuple[list[str], str | None]:
    """One `tests` entry's lines (8 columns in), with comments above it and on its lines as users scatter them, and
    the reason it must get: the block above joined with spaces, then each trailing comment, joined with "; "."""
    above = [f"# {text}" for text in draw(st.lists(COMMENT, max_size=2))]
    names = draw(NAMES_WRITTEN)
    quoted = [json.dumps(name) for name in names]
    if draw(st.booleans()):
        body = [f"- names: [{', '.join(quoted)}]"]
    else:
        body = ["- names:", *[f"    - {name}" for name in quoted]]
    body.append(f"  mode: {draw(st.sampled_from(['xfail', 'xfail_strict', 'skip']))}")
    optional = [
        f"  description: {json.dumps(draw(st.sampled_from(['d # e', '#', 'plain'])))}",
        "  tags: [model_1]",
        "  only:\n    ops: [add]",
    ]
    body += [field for field in optional if draw(st.booleans())]
    lines = [line for chunk in body for line in chunk.split("\n")]
    trailing = [draw(TRAILING) for _ in lines]
    written = draw(st.sampled_from([None, None, None, "written"]))
    if written:
        lines.append(f"  reason: {written}")
        trailing.append(draw(TRAILING))
    text = [
        line + (f"  # {comment}" if comment is not None else "") for line, comment in zip(lines, trailing, strict=True)
    ]
    parts = [" ".join(t for t in (line.removeprefix("#").strip() for line in above) if t)]
    parts += [comment.strip() for comment in trailing if comment is not None]
    expected = written or "; ".join(part for part in parts if part) or None
    return [*above, *text], expected


def test_every_entry_takes_the_comments_above_it_and_on_its_own_lines(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"

    @settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(entries=st.lists(commented_entry(), min_size=1, max_size=4), blank=st.booleans())
    def check(entries: list[tuple[list[str], str | None]], blank: bool) -> None:
        separator = ["        "] if blank else []
        lines = [line for written, _ in entries for line in [*separator, *(f"        {text}" for text in written)]]
        after = ["    - path: y.py  # the next file's", "      unlisted_test_mode: skip  # the next file's"]
        head = ["test_suite_config:", "  files:", "    - path: x.py", "      tests:"]
        config.write_text("\n".join([*head, *lines, *after]) + "\n", encoding="utf-8")
        rules = read_config(config)[0].test_suite_config.files[0].tests
        assert [rule.reason for rule in rules] == [expected for _, expected in entries]
        assert [rule.lacks_reason for rule in rules] == [expected is None for _, expected in entries]

    check()
