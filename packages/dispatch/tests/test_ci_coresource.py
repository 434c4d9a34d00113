"""Cores from the sources vendors use, against a local index serving the real torch wheels on this disk (2.13.0 CPU
and 2.14.1) under their real git versions, over real HTTP with range requests: the build made from the dispatched
commit found by reading each wheel's directory (kilobytes, not the wheel), a nightly by date, a CI-built wheel by
URL, and a source build at a commit by a configured command."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import threading
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from crcr.ci import cores, pipeline, remote_wheels
from crcr.ci.ciconfig import CIConfig, DeviceProfile
from crcr.ci.cores import MARKER, CoreError
from crcr.ci.coresource import CoreSource, obtain
from crcr.ci.model import Candidate

RANGE = re.compile(r"bytes=(\d*)-(\d*)\Z")


def _local_wheel(version: str) -> Path:
    """Where pip's own configuration finds torch==VERSION on this disk (nothing is copied)."""
    python = cores.pip_python()
    report = Path(os.environ.get("TMPDIR", "/tmp")) / f"report-{os.getpid()}-{version}.json"
    asked = ["install", "--dry-run", "--no-deps", "--ignore-installed", "--quiet", "--only-binary=:all:"]
    subprocess.run([python, "-m", "pip", *asked, "--report", str(report), f"torch=={version}"], capture_output=True)
    try:
        url = json.loads(report.read_text())["install"][0]["download_info"]["url"]
    except (OSError, ValueError, KeyError, IndexError):
        pytest.skip(f"torch=={version} is not on this machine's disk")
    finally:
        report.unlink(missing_ok=True)
    path = Path(urllib.parse.unquote(urllib.parse.urlsplit(url).path))
    if not url.startswith("file:") or not path.is_file():
        pytest.skip(f"torch=={version} resolves to a download ({url}), not a file on this disk")
    return path


class Index:
    """A PEP 503 index on loopback: `/simple/torch/` lists the files, `/files/NAME` serves them with Range."""

    def __init__(self, files: dict[str, Path], extra_links: tuple[str, ...] = ()) -> None:
        self.files = dict(files)
        self.extra_links = extra_links
        self.sent: Counter[str] = Counter()
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                path = urllib.parse.unquote(self.path)
                if path == "/simple/torch/":
                    names = [*index.files, *index.extra_links]
                    body = "".join(f'<a href="../../files/{urllib.parse.quote(n)}">{n}</a>\n' for n in names).encode()
                    return self._send(200, body, {"Content-Type": "text/html"})
                name = path.removeprefix("/files/")
                if name not in index.files:
                    return self._send(404, b"no such file", {})
                size = index.files[name].stat().st_size
                asked = RANGE.match(self.headers.get("Range", ""))
                start, end = 0, size - 1
                if asked:
                    first, last = asked.groups()
                    start, end = (size - int(last), size - 1) if not first else (int(first), int(last or size - 1))
                with index.files[name].open("rb") as handle:
                    handle.seek(start)
                    data = handle.read(end - start + 1)
                headers = {"Content-Range": f"bytes {start}-{end}/{size}"} if asked else {}
                index.sent[name] += len(data)
                return self._send(206 if asked else 200, data, headers)

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for key, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def wheels() -> dict[str, Path]:
    return {"2.13.0": _local_wheel("2.13.0"), "2.14.1": _local_wheel("2.14.1")}


@pytest.fixture
def index(wheels: dict[str, Path]) -> Iterator[Index]:
    served = Index({path.name: path for path in wheels.values()}, extra_links=(
        "torch-2.14.1-cp311-cp311-macosx_11_0_arm64.whl",  # another platform's: never asked
    ))  # fmt: skip
    yield served
    served.server.shutdown()


def test_the_build_made_from_the_dispatched_commit_is_found_without_downloading_the_others(
    wheels: dict[str, Path], index: Index, tmp_path: Path
) -> None:
    commit = cores.wheel_git_version(wheels["2.13.0"])
    newer = cores.wheel_git_version(wheels["2.14.1"])
    assert len(commit) == 40
    assert newer != commit  # two real builds, of two real commits
    said: list[str] = []
    source = CoreSource("nightly", "nightly", "dispatched", index=f"{index.url}/simple")
    wheel = obtain(source, tmp_path, commit, said.append)
    assert wheel == tmp_path / "wheelhouse" / "torch-nightly" / wheels["2.13.0"].name
    assert cores.wheel_sha256(wheel) == cores.wheel_sha256(wheels["2.13.0"])
    assert cores.wheel_git_version(wheel) == commit
    asked_first = wheels["2.14.1"].name  # the newest is asked first, by its directory alone
    assert said[0] == f"core nightly: {asked_first} was built from {newer[:12]}"
    assert 0 < index.sent[asked_first] < wheels["2.14.1"].stat().st_size / 100  # its zip directory (about 1.3 MB)
    marker = json.loads((wheel.parent / MARKER).read_text())
    assert (marker["git_version"], marker["source"]) == (commit, "nightly")
    assert cores.torch_wheel("nightly", tmp_path) == wheel  # the pipeline finds it by the core's name
    sent = sum(index.sent.values())
    assert obtain(source, tmp_path, commit) == wheel
    assert sum(index.sent.values()) - sent < wheels["2.14.1"].stat().st_size / 100  # asked again, not downloaded
    assert sum(index.sent.values()) == sent  # the build of this commit is kept: no wheel is even asked again


def test_no_build_of_the_commit_is_one_line_naming_what_was_seen(index: Index, tmp_path: Path) -> None:
    source = CoreSource("nightly", "nightly", "dispatched", index=f"{index.url}/simple")
    with pytest.raises(
        CoreError,
        match=r"none of the 2 newest builds on .* was built from 000000000000 \(they are: "
        r"2\.14\.1 \([0-9a-f]{12}\), 2\.13\.0\+cpu \([0-9a-f]{12}\)\); a PR's head is in no nightly",
    ):
        obtain(source, tmp_path, "0" * 40)
    with pytest.raises(CoreError, match="nightly: dispatched, but this run names no dispatched commit"):
        obtain(source, tmp_path, "")


def test_a_nightly_by_date(wheels: dict[str, Path], tmp_path: Path) -> None:
    """Nightlies are versioned 2.N.0.devYYYYMMDD: the date picks the file (here the real 2.13.0 wheel's bytes listed
    under two nightly names, one of them for another Python)."""
    dated = "torch-2.15.0.dev20261130+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    other = "torch-2.15.0.dev20261130+cpu-cp39-cp39-manylinux_2_28_x86_64.whl"
    served = Index({dated: wheels["2.13.0"], other: wheels["2.13.0"]})
    try:
        wheel = obtain(CoreSource("nightly-2026-11-30", "nightly", "2026-11-30", f"{served.url}/simple"), tmp_path, "")
        assert wheel.name == dated
        assert served.sent == Counter({dated: wheels["2.13.0"].stat().st_size})
        with pytest.raises(CoreError, match=r"has no nightly of 2026-12-01 for this Python \(newest: torch-2\.15"):
            obtain(CoreSource("n", "nightly", "2026-12-01", f"{served.url}/simple"), tmp_path, "")
    finally:
        served.server.shutdown()


def test_a_ci_built_wheel_by_url_with_the_dispatched_commit(wheels: dict[str, Path], tmp_path: Path) -> None:
    commit = cores.wheel_git_version(wheels["2.13.0"])
    name = wheels["2.13.0"].name
    served = Index({f"pytorch-wheel-{commit}/{name}": wheels["2.13.0"]})
    try:
        source = CoreSource("ci-wheel", "wheel", f"{served.url}/files/pytorch-wheel-{{sha}}/{name}")
        wheel = obtain(source, tmp_path, commit)
        assert cores.wheel_sha256(wheel) == cores.wheel_sha256(wheels["2.13.0"])
        assert obtain(source, tmp_path, commit) == wheel
        assert sum(served.sent.values()) == wheels["2.13.0"].stat().st_size  # once
        with pytest.raises(
            CoreError, match=r"pytorch-wheel-1111111111111111111111111111111111111111/.*: HTTP 404 Not Found$"
        ):
            obtain(source, tmp_path, "1" * 40)
        with pytest.raises(CoreError, match=r"needs a dispatched commit for \{sha\}"):
            obtain(source, tmp_path, "")
    finally:
        served.server.shutdown()


MAKE_WHEEL = """
import subprocess, sys, zipfile
from pathlib import Path
# as PyTorch's setup.py does: the build records the commit it was made from in torch/version.py
sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
version = Path("version.txt").read_text().strip()
out = Path(sys.argv[1]) / f"torch-{version}-py3-none-any.whl"
with zipfile.ZipFile(out, "w") as archive:
    archive.writestr("torch/version.py", f"__version__ = '{version}'\\ngit_version = '{sha}'\\n")
    metadata = f"Metadata-Version: 2.1\\nName: torch\\nVersion: {version}\\n"
    archive.writestr(f"torch-{version}.dist-info/METADATA", metadata)
print("built", out)
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_a_source_build_at_the_dispatched_commit(tmp_path: Path) -> None:
    """The configured command runs in a worktree of the checkout at the commit and leaves one torch wheel in {out};
    the same commit and command are built once. (A real PyTorch build takes an hour on a large runner; the checkout
    here builds a small wheel the way PyTorch's records its commit.)"""
    checkout = tmp_path / "pytorch"
    checkout.mkdir()
    (checkout / "make_wheel.py").write_text(MAKE_WHEEL)
    (checkout / "version.txt").write_text("2.16.0a0")
    _git(checkout, "init", "-q", "-b", "main")
    _git(checkout, "add", "-A")
    _git(checkout, "-c", "user.email=a@b.invalid", "-c", "user.name=a", "commit", "-q", "-m", "one")
    first = _git(checkout, "rev-parse", "HEAD")
    cache = tmp_path / "cache"
    source = CoreSource("source", "build", f"{sys.executable} make_wheel.py {{out}}", checkout=str(checkout))
    wheel = obtain(source, cache, first)
    assert wheel.name == "torch-2.16.0a0-py3-none-any.whl"
    assert cores.wheel_git_version(wheel) == first  # built at the dispatched commit, not at the checkout's HEAD
    assert wheel.stat().st_mtime_ns == obtain(source, cache, first).stat().st_mtime_ns  # built once
    (checkout / "make_wheel.py").write_text("raise SystemExit('the compiler ran out of memory')\n")
    _git(checkout, "-c", "user.email=a@b.invalid", "-c", "user.name=a", "commit", "-qam", "fails")
    failing = _git(checkout, "rev-parse", "HEAD")
    with pytest.raises(CoreError, match=rf"the build of {failing[:12]} failed \(exit 1: the compiler ran out of mem"):
        obtain(source, cache, failing)
    with pytest.raises(CoreError, match="does not resolve to a commit"):
        obtain(source, cache, "2" * 40)


def test_an_index_that_cannot_be_read_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(remote_wheels.RemoteError, match=r"^http://127\.0\.0\.1:9/simple/torch/: "):
        remote_wheels.compatible("http://127.0.0.1:9/simple")


def test_a_leg_obtains_a_named_core_again_and_refuses_another_wheel(wheels: dict[str, Path], tmp_path: Path) -> None:
    """A leg runs on a machine of its own: the core its prepare step planned with is obtained there again from the
    same source for the same commit, and a source that now yields other bytes is one line, not another core."""
    commit = cores.wheel_git_version(wheels["2.13.0"])
    name = wheels["2.13.0"].name
    served = Index({f"{commit}/{name}": wheels["2.13.0"]})
    try:
        source = CoreSource("ci-wheel", "wheel", f"{served.url}/files/{{sha}}/{name}")
        config = CIConfig("dev", ("ci-wheel",), "embedded", core_sources=(source,))
        ctx = pipeline.Context(
            tmp_path, tmp_path / "leg-cache", config, DeviceProfile("dev", "dev", (), {}), commit=commit
        )
        planned = Candidate("core", "ci-wheel", "2.13.0+cpu", cores.wheel_sha256(wheels["2.13.0"]), commit)
        wheel = pipeline.core_wheel(ctx, planned)
        assert cores.wheel_sha256(wheel) == planned.sha
        other = dataclasses.replace(planned, sha="0" * 64)
        with pytest.raises(CoreError, match=rf"core ci-wheel: {re.escape(name)} here is not the wheel the run planned"):
            pipeline.core_wheel(ctx, other)
    finally:
        served.server.shutdown()
