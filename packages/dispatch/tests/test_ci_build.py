"""Backend builds against a real temporary git workspace: two tiny pure-Python members, then a third whose C
extension fails to compile; a stand-in torch wheel keeps it fast (the real simulator build is checked by hand)."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from crcr.ci.build import BuildError, build_backend, build_env, first_error, members, source_key
from crcr.ci.worktrees import checkout, resolve_ref

UV_BUILD = '[build-system]\nrequires = ["uv_build>=0.13,<0.14"]\nbuild-backend = "uv_build"\n'


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def init_repo(repo: Path, who: str = "ci") -> None:
    """An empty repository on `main` that commits as `who`."""
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", f"{who}@example.invalid")
    git(repo, "config", "user.name", who)


def fake_torch(folder: Path, version: str = "9.9.0") -> Path:
    """A minimal installable wheel named torch: the build venv only needs something to install."""
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"torch-{version}-py3-none-any.whl"
    info = f"torch-{version}.dist-info"
    files = {
        "torch/__init__.py": f'__version__ = "{version}"\n',
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel


def write_member(root: Path, folder: str, name: str, extra: str = "") -> None:
    module = name.replace("-", "_")
    package = root / "packages" / folder
    (package / "src" / module).mkdir(parents=True)
    (package / "src" / module / "__init__.py").write_text(f'NAME = "{name}"\n')
    project = f'[project]\nname = "{name}"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n{extra}\n'
    (package / "pyproject.toml").write_text(
        project + UV_BUILD + f'\n[tool.uv.build-backend]\nmodule-name = "{module}"\n'
    )


def workspace(root: Path, folders: list[str]) -> None:
    listed = ", ".join(f'"packages/{f}"' for f in folders)
    (root / "pyproject.toml").write_text(
        f'[tool.uv.workspace]\nmembers = [{listed}]\n\n[tool.uv]\nfind-links = ["./.wheelhouse"]\n'
    )


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tag `good`: two pure members; tag `bad`: plus a member whose C extension has a deliberate #error."""
    repo = tmp_path_factory.mktemp("backend")
    init_repo(repo)
    write_member(repo, "alpha", "tmp-alpha")
    write_member(repo, "beta", "tmp-beta", '\n[project.optional-dependencies]\ntest = ["iniconfig"]\n')
    workspace(repo, ["alpha", "beta"])
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "good")
    git(repo, "tag", "good")
    native = repo / "packages" / "native"
    (native / "src" / "native").mkdir(parents=True)
    (native / "src" / "native" / "__init__.py").write_text("")
    (native / "src" / "native" / "ext.c").write_text('#include <Python.h>\n#error "deliberate: this needs C99000"\n')
    (native / "setup.py").write_text(
        "from setuptools import Extension, setup\nsetup(ext_modules=[Extension('native.ext', ['src/native/ext.c'])])\n"
    )
    (native / "pyproject.toml").write_text(
        '[project]\nname = "tmp-native"\nversion = "0.1.0"\n\n[build-system]\n'
        'requires = ["setuptools>=70", "torch==1.0.0"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[tool.setuptools.packages.find]\nwhere = ["src"]\n'
    )
    workspace(repo, ["alpha", "beta", "native"])
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "bad")
    git(repo, "tag", "bad")
    git(repo, "checkout", "-q", "good")  # the working tree is at another commit than the one built below
    return repo


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def torch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fake_torch(tmp_path_factory.mktemp("wheelhouse") / "torch-9.9.0")


def test_members_follow_the_worktree_pyproject(repo: Path, cache: Path) -> None:
    tree = checkout(repo, resolve_ref(repo, "bad"), cache)
    assert [m.distribution for m in members(tree)] == ["tmp-alpha", "tmp-beta", "tmp-native"]
    assert [m.distribution for m in members(repo)] == ["tmp-alpha", "tmp-beta"]  # the working tree is at `good`


def test_build_once_then_cached(repo: Path, cache: Path, torch: Path) -> None:
    tree = checkout(repo, resolve_ref(repo, "good"), cache)
    lines: list[str] = []
    result = build_backend(tree, torch, cache, lines.append)
    assert result.ok, result.first_error
    assert not result.cached
    assert sorted(result.wheels) == ["tmp-alpha", "tmp-beta"]
    out = Path(result.log).parent
    assert out.name.startswith(source_key(tree)[:12] + "-")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["torch"]["version"] == "9.9.0"
    assert manifest["torch"]["sha256"] == hashlib.sha256(torch.read_bytes()).hexdigest()
    for dist, path in result.wheels.items():
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == result.wheel_sha256[dist]
        assert manifest["wheels"][dist]["sha256"] == result.wheel_sha256[dist]
    assert sorted(p.name for p in out.glob("*.whl")) == sorted(Path(p).name for p in result.wheels.values())
    log_size = Path(result.log).stat().st_size
    stamps = {p: Path(p).stat().st_mtime_ns for p in result.wheels.values()}

    again = build_backend(tree, torch, cache, lines.append)
    assert again.cached
    assert again.wheels == result.wheels
    assert again.wheel_sha256 == result.wheel_sha256
    assert Path(result.log).stat().st_size == log_size  # nothing ran
    assert {p: Path(p).stat().st_mtime_ns for p in again.wheels.values()} == stamps
    assert any("cached" in line for line in lines)


def test_tampered_wheel_is_rebuilt(repo: Path, cache: Path, torch: Path) -> None:
    tree = checkout(repo, resolve_ref(repo, "good"), cache)
    first = build_backend(tree, torch, cache)
    Path(first.wheels["tmp-alpha"]).write_bytes(b"not a wheel")
    second = build_backend(tree, torch, cache)
    assert second.ok
    assert not second.cached
    assert second.wheel_sha256 == first.wheel_sha256  # the same sources build the same bytes


def test_another_torch_is_another_build(repo: Path, cache: Path, torch: Path, tmp_path: Path) -> None:
    tree = checkout(repo, resolve_ref(repo, "good"), cache)
    other = build_backend(tree, fake_torch(tmp_path / "torch-9.9.1", "9.9.1"), cache)
    assert other.ok
    assert not other.cached
    assert Path(other.log).parent != Path(build_backend(tree, torch, cache).log).parent


def test_compile_failure_is_a_result_with_the_first_error(repo: Path, cache: Path, torch: Path) -> None:
    tree = checkout(repo, resolve_ref(repo, "bad"), cache)
    result = build_backend(tree, torch, cache)
    assert not result.ok
    assert "#error" in result.first_error
    assert "deliberate: this needs C99000" in result.first_error
    assert "\n" not in result.first_error
    out = Path(result.log).parent
    assert not list(out.rglob("*.whl"))  # no half-built wheels, not even the members that did build
    assert "tmp-native" in Path(result.log).read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["ok"] is False
    assert manifest["failed"] == "tmp-native"
    size = Path(result.log).stat().st_size

    again = build_backend(tree, torch, cache)
    assert not again.ok
    assert again.cached
    assert again.first_error == result.first_error
    assert Path(result.log).stat().st_size == size  # not rebuilt


def test_bad_input_is_one_line(tmp_path: Path, torch: Path) -> None:
    with pytest.raises(BuildError, match="worktree not found"):
        build_backend(tmp_path / "missing", torch, tmp_path / "cache")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    with pytest.raises(BuildError, match="lists no"):
        build_backend(tmp_path, torch, tmp_path / "cache")
    with pytest.raises(BuildError, match="torch wheel not found"):
        build_backend(tmp_path, tmp_path / "torch-0-py3-none-any.whl", tmp_path / "cache")


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        (
            'running build_ext\n/x/c10/util/C++17.h:13:2: error: #error "C++20 or later compatible compiler is '
            'required to use PyTorch."\n   13 | #error ...\nninja: build stopped\nerror: Failed to build `x`\n',
            '/x/c10/util/C++17.h:13:2: error: #error "C++20 or later compatible compiler is required to use PyTorch."',
        ),
        ("a.cpp:3:1: fatal error: foo.h: No such file\n", "a.cpp:3:1: fatal error: foo.h: No such file"),
        (
            "/t/c10/util/intrusive_ptr.h:775:27: error: 'strong_ordering' in namespace 'std' does not name a type\n"
            "/t/torch/all.h:5:2: error: #error C++20 or later compatible compiler is required to use PyTorch.\n"
            "    5 | #error C++20 or later compatible compiler is required to use PyTorch.\n",
            "/t/torch/all.h:5:2: error: #error C++20 or later compatible compiler is required to use PyTorch.",
        ),
        ("ok\nerror: Failed to build `x`\n  cause: nope\n", "error: Failed to build `x`"),
        ("something\nlast words\n", "last words"),
    ],
)
def test_first_error(log: str, expected: str) -> None:
    assert first_error(log) == expected


def test_objects_from_an_earlier_build_are_not_reused(repo: Path, cache: Path, torch: Path) -> None:
    tree = checkout(repo, resolve_ref(repo, "good"), cache)
    stale = tree / "packages" / "alpha" / "build" / "temp" / "ext.o"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"compiled against another torch")
    assert build_backend(tree, torch, cache, force=True).ok
    assert not stale.exists()


def test_parallel_legs_build_once(repo: Path, cache: Path, tmp_path: Path) -> None:
    tree = checkout(repo, resolve_ref(repo, "good"), cache)
    wheel = fake_torch(tmp_path / "torch-9.9.2", "9.9.2")
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: build_backend(tree, wheel, cache), range(2)))
    assert all(r.ok for r in results)
    assert sorted(r.cached for r in results) == [False, True]
    assert results[0].wheel_sha256 == results[1].wheel_sha256


def test_a_commit_that_leaves_the_packages_alone_reuses_the_build(repo: Path, cache: Path, torch: Path) -> None:
    first = build_backend(checkout(repo, resolve_ref(repo, "good"), cache), torch, cache)
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "good"], check=True)
    (repo / "NOTES.md").write_text("docs only\n")
    subprocess.run(["git", "-C", str(repo), "add", "NOTES.md"], check=True)
    who = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "-C", str(repo), *who, "commit", "-qm", "docs"], check=True)
    docs = resolve_ref(repo, "HEAD")
    again = build_backend(checkout(repo, docs, cache), torch, cache)
    assert docs != resolve_ref(repo, "good")
    assert again.cached
    assert again.wheel_sha256 == first.wheel_sha256


def test_other_build_requirements_get_their_own_build_venv(cache: Path, torch: Path, tmp_path: Path) -> None:
    """A venv a build may be compiling in is never changed: another set of requirements gets a venv of its own."""
    log = tmp_path / "buildenv.log"
    first = build_env(torch, ["setuptools>=70"], cache, log)
    other = build_env(torch, ["setuptools>=70", "iniconfig"], cache, log)
    assert first != other
    assert first.exists()
    assert other.exists()
    assert build_env(torch, ["setuptools>=70"], cache, log) == first
