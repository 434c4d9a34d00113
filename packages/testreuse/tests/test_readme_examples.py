"""The READMEs' examples run as printed: `validate` runs here; `explain` needs the ring device, so the ids it names are
checked against the embedded tree they are collected from (an id naming no test exits 4)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import testreuse
from testreuse.cli import ExitCode, main
from testreuse.upstream import generic_tests

REPO = Path(__file__).resolve().parents[3]
READMES = [REPO / "README.md", REPO / "packages" / "testreuse" / "README.md"]
EMBEDDED = Path(testreuse.__file__).resolve().parent / "upstream" / "test"
EXAMPLE = re.compile(r"^testreuse (validate|explain) (\S+)(?: (\S+))?", re.MULTILINE)
#: Where `"$TORCH_ROOT"` examples find a real tree here: TORCH_ROOT, else the real upstream copies beside the repo.
REAL_TREE = Path(os.environ.get("TORCH_ROOT") or REPO.parent / "shared" / "data" / "upstream-tests")


def examples(command: str) -> list[tuple[str, str | None]]:
    found = [(m.group(2), m.group(3)) for r in READMES for m in EXAMPLE.finditer(r.read_text()) if m[1] == command]
    assert found, f"no `testreuse {command}` example"
    return found


def names_a_test(test_id: str, generic: frozenset[str]) -> bool:
    """A generic `Class::test`, or an instantiated `ClassDEVICE::test_device_...` of one."""
    if test_id in generic:
        return True
    cls, _, method = test_id.partition("::")
    return any(
        cls.startswith(g_cls) and cls[len(g_cls) :].isupper() and method.startswith(f"{g_test}_")
        for g_cls, _, g_test in (key.partition("::") for key in generic)
    )


@pytest.mark.parametrize(("config", "option"), examples("validate"))
def test_validate_examples_pass(config: str, option: str | None, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("TORCH_ROOT", raising=False)
    argv = ["validate", config]
    if option == "--torch-root":
        if not (REAL_TREE / "test").is_dir():
            pytest.skip(f"no real upstream tree at {REAL_TREE} (set TORCH_ROOT)")
        argv += ["--torch-root", str(REAL_TREE)]
    assert main(argv) == ExitCode.OK, capsys.readouterr().err


@pytest.mark.parametrize("test_id", [t for _, t in examples("explain")])
def test_explain_examples_name_an_embedded_test(test_id: str) -> None:
    generic = frozenset().union(*(generic_tests(p) for p in EMBEDDED.glob("test_*.py")))
    assert names_a_test(test_id, generic), test_id
