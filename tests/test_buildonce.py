"""Build-once rules: current wheels are verified, never rebuilt; damaged ones stop the run with one line."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from buildonce.build import build_members, plan_builds, verified_wheels
from buildonce.errors import BuildError
from buildonce.manifest import (
    Manifest,
    WheelRecord,
    file_sha256,
    read_manifest,
    source_sha256,
    write_manifest,
)
from buildonce.torch_source import TorchWheel, ensure_torch_wheel
from buildonce.workspace import Member, read_members, workspace_closure

ROOT = Path(__file__).resolve().parents[1]
TORCH = TorchWheel("2.13.0+cpu", "1" * 64)
NATIVE_PYPROJECT = """\
[project]
name = "tributary-native"
version = "0.1.0"
[build-system]
requires = ["setuptools", "torch"]
build-backend = "setuptools.build_meta"
"""


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A git checkout of two members' sources plus a native one, and a dist/ whose manifest says all are built."""
    root = tmp_path / "ws"
    (root / "packages").mkdir(parents=True)
    for name in ("selector", "dispatch"):
        shutil.copytree(ROOT / "packages" / name, root / "packages" / name, ignore=shutil.ignore_patterns("build"))
    native = root / "packages" / "native"
    (native / "src" / "native").mkdir(parents=True)
    (native / "src" / "native" / "__init__.py").write_text("")
    (native / "pyproject.toml").write_text(NATIVE_PYPROJECT)
    members = '["packages/selector", "packages/dispatch", "packages/native"]'
    (root / "pyproject.toml").write_text(f"[tool.uv.workspace]\nmembers = {members}\n")
    _git(root, "init", "-q")
    _git(root, "add", "packages", "pyproject.toml")
    dist = root / "dist"
    dist.mkdir()
    records = []
    for member in read_members(root):
        wheel = dist / f"{member.wheel_stem}-{member.version}-py3-none-any.whl"
        wheel.write_bytes(member.distribution.encode() * 100)
        torch = TORCH.sha256 if member.native else ""
        records.append(
            WheelRecord(
                member.distribution, member.version, wheel.name, file_sha256(wheel), source_sha256(member), torch
            )
        )
    write_manifest(dist, Manifest("abc", "2.13.0+cpu", tuple(records)))
    return root


def _stale(workspace: Path, torch: TorchWheel = TORCH) -> list[str]:
    return [m.distribution for m in plan_builds(read_members(workspace), workspace / "dist", torch, force=False)]


def _one_line(exc: pytest.ExceptionInfo[BuildError]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_current_wheels_are_not_rebuilt(workspace: Path) -> None:
    assert _stale(workspace) == []


def test_force_rebuilds_everything(workspace: Path) -> None:
    members = read_members(workspace)
    assert plan_builds(members, workspace / "dist", TORCH, force=True) == members


def test_source_change_makes_only_that_member_stale(workspace: Path) -> None:
    init = workspace / "packages" / "dispatch" / "src" / "crcr" / "__init__.py"
    init.write_text(init.read_text() + "\n# changed\n")
    assert _stale(workspace) == ["tributary-dispatch"]
    (workspace / "packages" / "selector" / "README.md").write_text("metadata goes into the wheel too\n")
    assert _stale(workspace) == ["tributary-selector", "tributary-dispatch"]


def test_only_tracked_wheel_sources_count(workspace: Path) -> None:
    dispatch = workspace / "packages" / "dispatch"
    (dispatch / "src" / "crcr" / "scratch.py").write_text("untracked: in no build\n")
    test_file = next((dispatch / "tests").glob("test_*.py"))
    test_file.write_text(test_file.read_text() + "\n# tests never reach the wheel\n")
    (dispatch / "tests" / "new_test.py").write_text("")
    _git(workspace, "add", str(dispatch / "tests"))
    assert _stale(workspace) == []
    _git(workspace, "add", str(dispatch / "src" / "crcr" / "scratch.py"))
    assert _stale(workspace) == ["tributary-dispatch"]


def test_a_different_torch_wheel_is_found_by_its_hash(workspace: Path) -> None:
    same_version = TorchWheel(TORCH.version, "2" * 64)
    assert _stale(workspace, same_version) == ["tributary-native"]
    assert _stale(workspace, TorchWheel("2.14.0+cpu", TORCH.sha256)) == []


def test_torch_wheel_identity_is_its_version_and_bytes(tmp_path: Path) -> None:
    wheel = tmp_path / "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"one build")
    first = TorchWheel.of(wheel)
    wheel.write_bytes(b"another build, same name")
    assert first.version == TorchWheel.of(wheel).version == "2.13.0+cpu"
    assert first.sha256 != TorchWheel.of(wheel).sha256


def _uv_stand_in(member: Member, wheel_bytes: bytes | None) -> Callable[..., None]:
    """Stands in for `uv build ... --out-dir DIR`: writes the member's wheel there, or fails as a compiler can."""

    def run(*command: str) -> None:
        if wheel_bytes is None:
            raise RuntimeError("uv build failed")
        out = Path(command[command.index("--out-dir") + 1])
        (out / f"{member.wheel_stem}-{member.version}-py3-none-any.whl").write_bytes(wheel_bytes)

    return run


def test_a_failed_build_keeps_the_previous_wheel(workspace: Path) -> None:
    members = read_members(workspace)
    dist = workspace / "dist"
    dispatch = [m for m in members if m.distribution == "tributary-dispatch"]
    before = {p.name: p.read_bytes() for p in dist.glob("*.whl")}
    with pytest.raises(RuntimeError, match="uv build failed"):
        build_members(workspace, dist, members, dispatch, TORCH, _uv_stand_in(dispatch[0], None))
    assert {p.name: p.read_bytes() for p in dist.glob("*.whl")} == before
    assert len(verified_wheels(dist, members)) == 3
    assert not list(dist.glob(".building-*"))
    build_members(workspace, dist, members, dispatch, TORCH, _uv_stand_in(dispatch[0], b"rebuilt"))
    (rebuilt,) = (p for p in verified_wheels(dist, members) if p.name.startswith("tributary_dispatch"))
    assert rebuilt.read_bytes() == b"rebuilt"


def test_corrupted_wheel_is_named(workspace: Path) -> None:
    wheel = next((workspace / "dist").glob("tributary_selector-*.whl"))
    wheel.write_bytes(b"garbage")
    with pytest.raises(BuildError) as exc:
        verified_wheels(workspace / "dist", read_members(workspace))
    assert wheel.name in _one_line(exc)
    assert "sha256" in str(exc.value)
    with pytest.raises(BuildError):
        _stale(workspace)


def test_missing_wheel_is_named(workspace: Path) -> None:
    wheel = next((workspace / "dist").glob("tributary_dispatch-*.whl"))
    wheel.unlink()
    with pytest.raises(BuildError) as exc:
        verified_wheels(workspace / "dist", read_members(workspace))
    assert wheel.name in _one_line(exc)
    assert "missing" in str(exc.value)


def test_unreadable_manifest_is_named(workspace: Path) -> None:
    (workspace / "dist" / "manifest.json").write_text("{not json")
    with pytest.raises(BuildError) as exc:
        read_manifest(workspace / "dist")
    assert "manifest.json" in _one_line(exc)


def test_no_manifest_means_build_everything(workspace: Path) -> None:
    (workspace / "dist" / "manifest.json").unlink()
    members = read_members(workspace)
    assert plan_builds(members, workspace / "dist", TORCH, force=False) == members
    with pytest.raises(BuildError, match="missing; run nox -s build"):
        verified_wheels(workspace / "dist", members)


def test_the_real_workspace_lists_five_prefixed_members() -> None:
    members = read_members(ROOT)
    assert [m.short_name for m in members] == ["simulator", "compiler", "testreuse", "selector", "dispatch"]
    assert all(m.distribution == f"tributary-{m.short_name}" for m in members)
    assert [m.distribution for m in members if m.native] == ["tributary-simulator"]
    assert workspace_closure(members, "tributary-selector")[0].distribution == "tributary-selector"


def test_explicit_torch_wheel_must_be_a_wheel(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="TRIBUTARY_TORCH_WHEEL"):
        ensure_torch_wheel(tmp_path / "wh", {"TRIBUTARY_TORCH_WHEEL": str(tmp_path / "nope.whl")})


def test_explicit_torch_wheel_replaces_the_previous_one(tmp_path: Path) -> None:
    house = tmp_path / "wh"
    house.mkdir()
    (house / "torch-2.12.0-cp311-cp311-linux_x86_64.whl").write_bytes(b"old")
    new = tmp_path / "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl"
    new.write_bytes(b"new")
    chosen = ensure_torch_wheel(house, {"TRIBUTARY_TORCH_WHEEL": str(new)})
    assert [p.name for p in house.iterdir()] == [new.name]
    assert chosen.read_bytes() == b"new"
