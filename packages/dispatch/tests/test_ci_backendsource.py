"""A backend from a vendor's own git repository: mirrored into the cache (a path, a bundle file), fetched again each
run, built as one setup.py package without isolation, checked for the distributions the profile names, and run with
this repository's own packages built beside it. Real git, real builds; a stand-in torch wheel keeps it fast."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from crcr.ci import backendbuild
from crcr.ci.backendsource import BackendSource, SourceError, repository
from crcr.ci.build import BuildError, Recipe, build_backend, members
from crcr.ci.ciconfig import DeviceProfile
from crcr.ci.worktrees import checkout, resolve_ref
from test_ci_build import fake_torch, git, init_repo, workspace, write_member

SETUP = "from setuptools import setup\nsetup(name='tmp-vendor', version='{version}', packages=['vendor'])\n"


def vendor_repo(root: Path) -> Path:
    """A vendor's repository: a setup.py package with no pyproject, two commits (tags v1, v2)."""
    repo = root / "vendor"
    (repo / "vendor").mkdir(parents=True)
    init_repo(repo, "vendor")
    (repo / "vendor" / "__init__.py").write_text("VERSION = 1\n")
    (repo / "setup.py").write_text(SETUP.format(version="1.0"))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "v1")
    git(repo, "tag", "v1")
    (repo / "setup.py").write_text(SETUP.format(version="2.0"))
    git(repo, "commit", "-q", "-am", "v2")
    git(repo, "tag", "v2")
    return repo


def own_repo(root: Path) -> Path:
    """This repository in miniature: a workspace whose `tmp-harness` needs `tmp-base`, beside an unrelated member."""
    repo = root / "own"
    repo.mkdir()
    init_repo(repo)
    write_member(repo, "base", "tmp-base")
    write_member(repo, "harness", "tmp-harness", 'dependencies = ["tmp-base"]')
    write_member(repo, "device", "tmp-device")
    workspace(repo, ["base", "harness", "device"])
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "own")
    return repo


def test_a_vendor_repository_is_mirrored_and_fetched_again_each_run(tmp_path: Path) -> None:
    vendor = vendor_repo(tmp_path)
    cache = tmp_path / "cache"
    source = BackendSource(repo=str(vendor), build="package")
    mirror = repository(source, tmp_path, cache)
    assert mirror.parent == cache / "backends"
    assert resolve_ref(mirror, "HEAD") == git(vendor, "rev-parse", "v2")
    assert resolve_ref(mirror, "v1") == git(vendor, "rev-parse", "v1")
    (vendor / "vendor" / "__init__.py").write_text("VERSION = 3\n")
    git(vendor, "commit", "-q", "-am", "v3")
    assert repository(source, tmp_path, cache) == mirror
    assert resolve_ref(mirror, "HEAD") == git(vendor, "rev-parse", "HEAD")  # the next run sees the new commit
    assert repository(BackendSource(), tmp_path, cache) == tmp_path  # no repo: this repository itself


def test_a_bundle_file_and_a_relative_path_are_repositories_too(tmp_path: Path) -> None:
    vendor = vendor_repo(tmp_path)
    git(vendor, "bundle", "create", "-q", str(tmp_path / "vendor.bundle"), "--all")
    mirror = repository(BackendSource(repo="vendor.bundle"), tmp_path, tmp_path / "cache")
    assert resolve_ref(mirror, "v1") == git(vendor, "rev-parse", "v1")
    assert resolve_ref(mirror, "HEAD") == git(vendor, "rev-parse", "HEAD")


def test_a_repository_that_cannot_be_cloned_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"^git clone of the backend repository failed: .*missing"):
        repository(BackendSource(repo="missing"), tmp_path, tmp_path / "cache")


def test_a_setup_py_package_builds_and_must_yield_the_profiles_distributions(tmp_path: Path) -> None:
    vendor = vendor_repo(tmp_path)
    cache = tmp_path / "cache"
    torch = fake_torch(tmp_path / "wheelhouse" / "torch-9.9.0")
    tree = checkout(repository(BackendSource(repo=str(vendor)), tmp_path, cache), git(vendor, "rev-parse", "v1"), cache)
    assert [m.distribution for m in members(tree, Recipe(kind="package"))] == [""]  # setup.py says it when run
    built = build_backend(tree, torch, cache, recipe=Recipe(kind="package", distributions=("tmp-vendor",)))
    assert built.ok, built.first_error
    assert [Path(p).name for p in built.wheels.values()] == ["tmp_vendor-1.0-py3-none-any.whl"]
    wrong = build_backend(tree, torch, cache, recipe=Recipe(kind="package", distributions=("torch-vendor",)))
    assert not wrong.ok
    assert wrong.first_error == "the build made tmp_vendor, not the profile's torch-vendor"
    with pytest.raises(BuildError, match=r"neither pyproject\.toml nor setup\.py"):
        members(tmp_path / "cache", Recipe(kind="package"))


def test_wheels_that_are_not_native_are_built_once_for_every_torch(tmp_path: Path) -> None:
    vendor = vendor_repo(tmp_path)
    cache = tmp_path / "cache"
    tree = checkout(vendor, git(vendor, "rev-parse", "v2"), cache)
    recipe = Recipe(kind="package", native=False)
    first = build_backend(tree, fake_torch(tmp_path / "a", "9.9.0"), cache, recipe=recipe)
    second = build_backend(tree, fake_torch(tmp_path / "b", "9.9.1"), cache, recipe=recipe)
    assert first.ok
    assert second.cached
    assert second.wheels == first.wheels
    assert Path(first.log).parent.name.endswith("-any")
    native = build_backend(tree, fake_torch(tmp_path / "b", "9.9.1"), cache, recipe=Recipe(kind="package"))
    assert not native.cached  # a native build is keyed by its torch


def test_a_vendor_backend_runs_with_this_repositorys_packages_it_asks_for(tmp_path: Path) -> None:
    vendor, own = vendor_repo(tmp_path), own_repo(tmp_path)
    cache = tmp_path / "cache"
    profile = DeviceProfile(
        "vendor", "vendor", ("tmp-vendor", "tmp-harness[test]"), {"upstream": "configs/vendor"},
        origin=BackendSource(repo=str(vendor), build="package", distributions=("tmp-vendor",)),
    )  # fmt: skip
    tree = checkout(repository(profile.origin, own, cache), git(vendor, "rev-parse", "v2"), cache)
    built = backendbuild.build_for(profile, own, tree, fake_torch(tmp_path / "wheelhouse"), cache)
    assert built.ok, built.first_error
    assert sorted(built.wheels) == ["tmp-base", "tmp-harness", "tmp_vendor"]  # tmp-device: not asked for
    assert Path(built.log).parent == Path(built.wheels["tmp_vendor"]).parent  # the backend's build leads
    assert backendbuild.own_packages(dataclasses.replace(profile, origin=BackendSource()), own) == ()  # in its build
