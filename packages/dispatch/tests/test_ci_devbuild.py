"""`crcr build`: a working tree's packages (uncommitted and untracked files included) built by the pipeline's
build-once and published into one folder with a manifest; the developer's index untouched; a failed build leaves
the previous wheels. Real git, real builds; a stand-in torch wheel keeps it fast."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from crcr.ci.devbuild import BuildFailed, build_into
from crcr.ci.snapshot import snapshot
from test_ci_build import fake_torch, git, init_repo, workspace, write_member


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A committed workspace: `tmp-base`, and `tmp-app`, which needs it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    init_repo(repo, "dev")
    write_member(repo, "base", "tmp-base")
    write_member(repo, "app", "tmp-app", 'dependencies = ["tmp-base"]')
    workspace(repo, ["base", "app"])
    (repo / ".gitignore").write_text("scratch/\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "one")
    return repo


def test_a_clean_tree_is_head_and_an_edit_is_a_commit_on_it(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    assert snapshot(repo) == head
    (repo / "packages" / "base" / "src" / "tmp_base" / "new.py").write_text("NEW = 1\n")  # untracked
    (repo / "scratch").mkdir()
    (repo / "scratch" / "ignored.txt").write_text("not part of it\n")
    status = git(repo, "status", "--porcelain")
    made = snapshot(repo)
    assert made != head
    assert snapshot(repo) == made  # the same tree on the same HEAD: the same commit
    assert git(repo, "rev-parse", f"{made}^") == head
    files = git(repo, "ls-tree", "-r", "--name-only", made).split()
    assert "packages/base/src/tmp_base/new.py" in files
    assert "scratch/ignored.txt" not in files
    assert git(repo, "status", "--porcelain") == status  # the developer's index is as it was
    assert git(repo, "rev-parse", "HEAD") == head


def test_the_working_tree_is_built_and_published_with_what_each_needs(repo: Path, tmp_path: Path) -> None:
    cache, out, torch = tmp_path / "cache", tmp_path / "dist", fake_torch(tmp_path / "wheels" / "torch-9.9.0")
    (repo / "packages" / "app" / "src" / "tmp_app" / "__init__.py").write_text('NAME = "uncommitted"\n')
    lines: list[str] = []
    manifest = build_into(repo, cache, out, torch, False, lines.append)
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert manifest["wheels"]["tmp-app"]["needs"] == ["tmp-base"]
    assert manifest["wheels"]["tmp-base"]["needs"] == []
    assert manifest["torch"]["version"] == "9.9.0"
    assert (out / torch.name).is_file()
    for entry in manifest["wheels"].values():
        assert hashlib.sha256((out / entry["file"]).read_bytes()).hexdigest() == entry["sha256"]
    app = out / manifest["wheels"]["tmp-app"]["file"]
    probe = f"import zipfile; print(zipfile.ZipFile({str(app)!r}).read('tmp_app/__init__.py').decode())"
    assert "uncommitted" in subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout

    again: list[str] = []
    assert build_into(repo, cache, out, torch, False, again.append) == manifest
    assert any("cached" in line for line in again)  # nothing changed: nothing built


def test_a_failed_build_keeps_the_previous_wheels(repo: Path, tmp_path: Path) -> None:
    cache, out, torch = tmp_path / "cache", tmp_path / "dist", fake_torch(tmp_path / "wheels" / "torch-9.9.0")
    before = build_into(repo, cache, out, torch, False, lambda _: None)
    (repo / "packages" / "base" / "pyproject.toml").write_text(
        '[project]\nname = "tmp-base"\nversion = "0.1.0"\n\n[build-system]\nrequires = ["uv_build>=0.13,<0.14"]\n'
        'build-backend = "uv_build"\n\n[tool.uv.build-backend]\nmodule-name = "no_such_module"\n'
    )
    with pytest.raises(BuildFailed, match="Failed to build"):
        build_into(repo, cache, out, torch, False, lambda _: None)
    assert json.loads((out / "manifest.json").read_text()) == before
    for entry in before["wheels"].values():
        assert hashlib.sha256((out / entry["file"]).read_bytes()).hexdigest() == entry["sha256"]


def test_crcr_build_outside_a_repository_is_one_line(tmp_path: Path) -> None:
    torch = fake_torch(tmp_path / "wheels" / "torch-9.9.0")
    done = subprocess.run(
        [str(Path(sys.executable).parent / "crcr"), "build", "--repo", str(tmp_path), "--out", str(tmp_path / "dist"),
         "--cache", str(tmp_path / "cache")],
        capture_output=True, text=True, env={"TRIBUTARY_TORCH_WHEEL": str(torch), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: {tmp_path} is not a git repository"]
    assert not (tmp_path / "dist").exists()
    assert not (tmp_path / "cache").exists()  # said before any torch was fetched


def test_crcr_build_takes_the_torch_wheel_named_in_the_environment(repo: Path, tmp_path: Path) -> None:
    torch = fake_torch(tmp_path / "wheels" / "torch-9.9.7", "9.9.7")
    out = tmp_path / "dist"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "crcr"), "build", "--repo", str(repo), "--out", str(out),
         "--cache", str(tmp_path / "cache")],
        capture_output=True, text=True, env={**os.environ, "TRIBUTARY_TORCH_WHEEL": str(torch)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"2 wheel(s) against torch 9.9.7 in {out}"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["torch"] == {
        "file": torch.name, "version": "9.9.7", "sha256": hashlib.sha256(torch.read_bytes()).hexdigest(),
    }  # fmt: skip
    assert (out / torch.name).read_bytes() == torch.read_bytes()
