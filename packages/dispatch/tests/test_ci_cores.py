"""Torch wheels fetched once per version: the real torch 2.13.0 (on this machine's disk, through pip's own
configuration), and a stand-in pip for what must not touch the network (the index override, failures)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from crcr.ci import combinations, cores
from crcr.ci.cores import INDEX_ENV, MARKER, CoreError, torch_wheel, wheel_sha256

REAL_RUN = subprocess.run


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def real(cache: Path) -> Path:
    env = {k: v for k, v in os.environ.items() if k != INDEX_ENV}
    return torch_wheel("2.13.0", cache, env)


def test_torch_2_13_0_with_its_dependencies(real: Path, cache: Path) -> None:
    folder = cache / "wheelhouse" / "torch-2.13.0"
    assert real.parent == folder
    assert real.name.startswith("torch-2.13.0")
    assert any(folder.glob("sympy-*.whl"))  # dependencies too: the folder is a complete find-links source
    marker = json.loads((folder / MARKER).read_text())
    assert marker["wheel"] == real.name
    assert marker["sha256"] == hashlib.sha256(real.read_bytes()).hexdigest()


def test_second_call_reuses_the_folder(real: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pip(*args: object, **kwargs: object) -> None:
        raise AssertionError("pip ran again")

    monkeypatch.setattr(cores.subprocess, "run", no_pip)
    assert torch_wheel("2.13.0", cache) == real


def test_wheel_sha256(real: Path, tmp_path: Path) -> None:
    assert wheel_sha256(real) == hashlib.sha256(real.read_bytes()).hexdigest()
    other = tmp_path / "x.whl"
    other.write_bytes(b"one")
    assert wheel_sha256(other) == hashlib.sha256(b"one").hexdigest()
    other.write_bytes(b"two!")
    assert wheel_sha256(other) == hashlib.sha256(b"two!").hexdigest()  # a changed file is hashed again


def fake_pip(calls: list[list[str]], version: str = "") -> object:
    """Stands in for `pip download`: records the command and drops a wheel into --dest (none if no version)."""

    def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        if command[1:3] == ["-m", "pip"] and "download" in command:
            calls.append(command)
            dest = Path(command[command.index("--dest") + 1])
            if version:
                (dest / f"torch-{version}-cp311-cp311-linux_x86_64.whl").write_bytes(b"wheel")
                return subprocess.CompletedProcess(command, 0)
            print("ERROR: No matching distribution found for torch==0.0.1", file=kwargs["stdout"], flush=True)  # type: ignore[call-overload]
            return subprocess.CompletedProcess(command, 1)
        return REAL_RUN(command, **kwargs)  # type: ignore[call-overload]

    return run


def test_index_override_and_user_files_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(cores.subprocess, "run", fake_pip(calls, "2.99.0+cpu"))
    folder = tmp_path / "wheelhouse" / "torch-2.99.0"
    folder.mkdir(parents=True)
    (folder / "mine.txt").write_text("keep me")
    wheel = torch_wheel("2.99.0", tmp_path, {INDEX_ENV: "https://download.pytorch.org/whl/cpu"})
    assert wheel.name == "torch-2.99.0+cpu-cp311-cp311-linux_x86_64.whl"
    (command,) = calls
    assert command[command.index("--index-url") + 1] == "https://download.pytorch.org/whl/cpu"
    assert command[-1] == "torch==2.99.0"
    assert "--no-deps" not in command
    assert (folder / "mine.txt").read_text() == "keep me"
    assert json.loads((folder / MARKER).read_text())["index"] == "https://download.pytorch.org/whl/cpu"
    assert torch_wheel("2.99.0", tmp_path, {}) == wheel
    assert len(calls) == 1


def test_no_marker_means_fetch_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(cores.subprocess, "run", fake_pip(calls, "2.99.0"))
    folder = tmp_path / "wheelhouse" / "torch-2.99.0"
    folder.mkdir(parents=True)
    (folder / "torch-2.99.0-cp311-cp311-linux_x86_64.whl").write_bytes(b"half")  # an interrupted download
    torch_wheel("2.99.0", tmp_path, {})
    assert len(calls) == 1
    assert (folder / MARKER).is_file()


def test_failure_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cores.subprocess, "run", fake_pip([]))
    with pytest.raises(CoreError, match=r"could not fetch torch==0\.0\.1 .*No matching distribution") as info:
        torch_wheel("0.0.1", tmp_path, {})
    assert "\n" not in str(info.value)
    assert INDEX_ENV in str(info.value)
    assert not (tmp_path / "wheelhouse" / "torch-0.0.1" / MARKER).exists()


def test_real_pip_failure_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, INDEX_ENV: (tmp_path / "no-index").as_uri()}
    with pytest.raises(CoreError, match=r"could not fetch torch==0\.0\.1") as info:
        torch_wheel("0.0.1", tmp_path, env)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("version", ["", "../../etc", "latest", "2.13.0 --pre"])
def test_bad_version_is_refused(version: str, tmp_path: Path) -> None:
    with pytest.raises(CoreError, match="not a torch version"):
        torch_wheel(version, tmp_path)
    assert not (tmp_path / "wheelhouse").exists()


def _index_with(tmp_path: Path, version: str) -> tuple[Path, Path]:
    """A local simple index holding one pure-Python `torch` wheel whose link carries no hash."""
    import zipfile

    wheel = tmp_path / "files" / f"torch-{version}-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    info = f"torch-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        archive.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        archive.writestr(f"{info}/RECORD", "")
    page = tmp_path / "simple" / "torch" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<a href="{wheel.as_uri()}">{wheel.name}</a>\n')
    return tmp_path / "simple", wheel


def test_peek_names_version_and_sha256_of_a_wheel_it_does_not_fetch(tmp_path: Path) -> None:
    index, wheel = _index_with(tmp_path, "2.0.0")
    env = {**os.environ, INDEX_ENV: index.as_uri(), "PIP_FIND_LINKS": "", "PIP_EXTRA_INDEX_URL": ""}
    cache = tmp_path / "cache"
    assert cores.peek("2.0.0", cache, env) == ("2.0.0", hashlib.sha256(wheel.read_bytes()).hexdigest(), False)
    assert not list(cache.rglob("*.whl"))  # resolved, not fetched
    with pytest.raises(CoreError, match=r"torch==2\.0\.1 does not resolve: ") as info:
        cores.peek("2.0.1", cache, env)
    assert "\n" not in str(info.value)


def test_peek_hashes_a_local_file_when_pip_reports_no_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = tmp_path / "torch-2.0.2-py3-none-any.whl"
    wheel.write_bytes(b"a local wheel")

    def pip_without_hash(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        if "--report" not in command:
            return REAL_RUN(command, **kwargs)  # type: ignore[call-overload]
        report = Path(command[command.index("--report") + 1])
        found = {"download_info": {"url": wheel.as_uri(), "archive_info": {}}, "metadata": {"version": "2.0.2"}}
        report.write_text(json.dumps({"install": [found]}))
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(cores.subprocess, "run", pip_without_hash)
    assert cores.peek("2.0.2", tmp_path / "cache", {}) == ("2.0.2", hashlib.sha256(b"a local wheel").hexdigest(), False)


def test_a_core_names_the_commit_its_wheel_was_built_from(real: Path, cache: Path, tmp_path: Path) -> None:
    """torch's own `torch.version.git_version`, read from the real wheel: what tells a release from a dispatched
    commit. A wheel that does not say has no commit, not a guessed one."""
    git = cores.wheel_git_version(real)
    assert len(git) == 40
    assert int(git, 16)
    assert combinations.core("2.13.0", cache).git == git
    _, bare = _index_with(tmp_path, "9.9.9")
    assert cores.wheel_git_version(bare) == ""
