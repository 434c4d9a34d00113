"""A member's wheel is reused from any recorded build with the same folder tree and build requirements: a commit that
touches one package rebuilds only it, and a wheel that is not pure Python is reused only against the same torch.
Real git, real builds (a one-line C extension for the platform wheel); a stand-in torch wheel keeps it fast."""

from __future__ import annotations

from pathlib import Path

import pytest
from crcr.ci.build import build_backend
from crcr.ci.worktrees import checkout, resolve_ref
from test_ci_build import fake_torch, git, init_repo, workspace, write_member

CEXT_SETUP = (
    "from setuptools import Extension, setup\n"
    "setup(packages=['cext'], package_dir={'': 'src'},\n"
    "      ext_modules=[Extension('cext._c', ['src/cext/c.c'])])\n"
)
CEXT_SOURCE = (
    "#include <Python.h>\n"
    'static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_c", NULL, -1, NULL};\n'
    "PyMODINIT_FUNC PyInit__c(void) { return PyModule_Create(&m); }\n"
)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two pure members and one with a C extension (a platform wheel); tag `one`, then `two` touching alpha only."""
    repo = tmp_path_factory.mktemp("members")
    init_repo(repo)
    write_member(repo, "alpha", "tmp-alpha")
    write_member(repo, "beta", "tmp-beta")
    cext = repo / "packages" / "cext"
    (cext / "src" / "cext").mkdir(parents=True)
    (cext / "src" / "cext" / "__init__.py").write_text("")
    (cext / "src" / "cext" / "c.c").write_text(CEXT_SOURCE)
    (cext / "setup.py").write_text(CEXT_SETUP)
    (cext / "pyproject.toml").write_text(
        '[project]\nname = "tmp-cext"\nversion = "0.1.0"\n\n'
        '[build-system]\nrequires = ["setuptools>=70"]\nbuild-backend = "setuptools.build_meta"\n'
    )
    workspace(repo, ["alpha", "beta", "cext"])
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "one")
    git(repo, "tag", "one")
    (repo / "packages" / "alpha" / "src" / "tmp_alpha" / "__init__.py").write_text('NAME = "changed"\n')
    git(repo, "commit", "-q", "-am", "two")
    git(repo, "tag", "two")
    return repo


def built_and_reused(lines: list[str]) -> tuple[list[str], list[str]]:
    """The members a build made and the members it reused, from its progress lines."""
    steps = [line.split(": ", 2)[1:] for line in lines if line.startswith("build ") and line.count(": ") >= 1]
    built = [step[0] for step in steps if len(step) == 1 and step[0].startswith("tmp-")]
    reused = [step[0] for step in steps if len(step) == 2 and step[1].startswith("reused from ")]
    return built, reused


def test_a_commit_touching_one_member_rebuilds_only_it(repo: Path, tmp_path: Path) -> None:
    cache, torch = tmp_path / "cache", fake_torch(tmp_path / "wheels" / "torch-9.9.0")
    first: list[str] = []
    one = build_backend(checkout(repo, resolve_ref(repo, "one"), cache), torch, cache, first.append)
    assert one.ok, one.first_error
    assert built_and_reused(first) == (["tmp-alpha", "tmp-beta", "tmp-cext"], [])

    second: list[str] = []
    two = build_backend(checkout(repo, resolve_ref(repo, "two"), cache), torch, cache, second.append)
    assert two.ok, two.first_error
    assert not two.cached
    assert built_and_reused(second) == (["tmp-alpha"], ["tmp-beta", "tmp-cext"])
    assert two.wheel_sha256["tmp-beta"] == one.wheel_sha256["tmp-beta"]
    assert two.wheel_sha256["tmp-cext"] == one.wheel_sha256["tmp-cext"]
    assert two.wheel_sha256["tmp-alpha"] != one.wheel_sha256["tmp-alpha"]
    assert Path(two.wheels["tmp-beta"]).stat().st_ino == Path(one.wheels["tmp-beta"]).stat().st_ino  # one copy


def test_a_platform_wheel_is_not_reused_against_another_torch(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    tree = checkout(repo, resolve_ref(repo, "one"), cache)
    assert build_backend(tree, fake_torch(tmp_path / "a" / "torch-9.9.0"), cache).ok
    lines: list[str] = []
    other = build_backend(tree, fake_torch(tmp_path / "b" / "torch-9.9.1", "9.9.1"), cache, lines.append)
    assert other.ok, other.first_error
    assert built_and_reused(lines) == (["tmp-cext"], ["tmp-alpha", "tmp-beta"])


def test_a_tampered_wheel_is_not_reused_and_force_reuses_nothing(repo: Path, tmp_path: Path) -> None:
    cache, torch = tmp_path / "cache", fake_torch(tmp_path / "wheels" / "torch-9.9.0")
    one = build_backend(checkout(repo, resolve_ref(repo, "one"), cache), torch, cache)
    Path(one.wheels["tmp-beta"]).write_bytes(b"not a wheel")
    lines: list[str] = []
    two = build_backend(checkout(repo, resolve_ref(repo, "two"), cache), torch, cache, lines.append)
    assert two.ok, two.first_error
    assert built_and_reused(lines) == (["tmp-alpha", "tmp-beta"], ["tmp-cext"])
    lines.clear()
    assert build_backend(checkout(repo, resolve_ref(repo, "two"), cache), torch, cache, lines.append, force=True).ok
    assert built_and_reused(lines) == (["tmp-alpha", "tmp-beta", "tmp-cext"], [])
