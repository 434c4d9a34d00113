"""Build-once rules: current wheels are verified, never rebuilt; damaged ones stop the run with one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from buildonce.build import plan_builds, verified_wheels
from buildonce.errors import BuildError
from buildonce.manifest import (
    Manifest,
    WheelRecord,
    file_sha256,
    read_manifest,
    source_sha256,
    write_manifest,
)
from buildonce.torch_source import ensure_torch_wheel
from buildonce.workspace import read_members, workspace_closure

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of two members' sources plus a dist/ whose manifest says both are built."""
    root = tmp_path / "ws"
    (root / "packages").mkdir(parents=True)
    for name in ("selector", "dispatch"):
        shutil.copytree(ROOT / "packages" / name, root / "packages" / name, ignore=shutil.ignore_patterns("build"))
    (root / "pyproject.toml").write_text('[tool.uv.workspace]\nmembers = ["packages/selector", "packages/dispatch"]\n')
    dist = root / "dist"
    dist.mkdir()
    records = []
    for member in read_members(root):
        wheel = dist / f"{member.wheel_stem}-{member.version}-py3-none-any.whl"
        wheel.write_bytes(member.distribution.encode() * 100)
        records.append(
            WheelRecord(member.distribution, member.version, wheel.name, file_sha256(wheel), source_sha256(member))
        )
    write_manifest(dist, Manifest("abc", "2.13.0+cpu", tuple(records)))
    return root


def _one_line(exc: pytest.ExceptionInfo[BuildError]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_current_wheels_are_not_rebuilt(workspace: Path) -> None:
    assert plan_builds(read_members(workspace), workspace / "dist", "2.13.0+cpu", force=False) == []


def test_force_rebuilds_everything(workspace: Path) -> None:
    members = read_members(workspace)
    assert plan_builds(members, workspace / "dist", "2.13.0+cpu", force=True) == members


def test_source_change_makes_only_that_member_stale(workspace: Path) -> None:
    init = workspace / "packages" / "dispatch" / "src" / "crcr" / "__init__.py"
    init.write_text(init.read_text() + "\n# changed\n")
    stale = plan_builds(read_members(workspace), workspace / "dist", "2.13.0+cpu", force=False)
    assert [m.distribution for m in stale] == ["tributary-dispatch"]


def test_corrupted_wheel_is_named(workspace: Path) -> None:
    wheel = next((workspace / "dist").glob("tributary_selector-*.whl"))
    wheel.write_bytes(b"garbage")
    with pytest.raises(BuildError) as exc:
        verified_wheels(workspace / "dist", read_members(workspace))
    assert wheel.name in _one_line(exc)
    assert "sha256" in str(exc.value)
    with pytest.raises(BuildError):
        plan_builds(read_members(workspace), workspace / "dist", "2.13.0+cpu", force=False)


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
    assert plan_builds(members, workspace / "dist", "2.13.0+cpu", force=False) == members
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
