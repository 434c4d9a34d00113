"""The committed JSON Schema is generated from the model; this fails when someone forgets to regenerate it."""

from __future__ import annotations

from pathlib import Path

from testreuse.cli import ExitCode, main

COMMITTED = Path(__file__).resolve().parents[1] / "schema" / "testreuse-config.schema.json"


def test_committed_schema_is_current(capsys) -> None:
    code = main(["schema", "--check", str(COMMITTED)])
    assert code == ExitCode.OK, capsys.readouterr().err


def test_stale_schema_is_reported(tmp_path: Path, capsys) -> None:
    stale = tmp_path / "schema.json"
    stale.write_text("{}\n")
    assert main(["schema", "--check", str(stale)]) == ExitCode.STALE
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"error: {stale} is stale"
    assert err[1].startswith("hint: run `testreuse schema --output")
