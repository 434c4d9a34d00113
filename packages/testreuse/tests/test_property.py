"""Generated malformed configs: always one-line errors and a non-zero exit, never a traceback."""

from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testreuse.cli import ExitCode, main

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
    max_leaves=12,
)
DOCUMENTS = st.one_of(
    st.dictionaries(st.just("test_suite_config"), VALUES, min_size=1).map(yaml.safe_dump),
    VALUES.map(yaml.safe_dump),
    st.text(max_size=60),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=DOCUMENTS)
def test_malformed_configs_give_one_line_errors(tmp_path: Path, capsys, text: str) -> None:
    config = tmp_path / "fuzz.yaml"
    config.write_text(text, encoding="utf-8")
    code = main(["validate", str(config), "--torch-root", str(tmp_path)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    if code == ExitCode.OK:
        assert captured.out.startswith("ok: ")
        return
    assert code == ExitCode.INVALID_CONFIG
    lines = captured.err.splitlines()
    assert lines
    assert all(line.startswith(f"error: {config}") for line in lines), lines
