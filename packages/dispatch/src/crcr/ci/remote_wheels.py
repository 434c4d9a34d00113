"""Torch wheels on an index or at a URL: which an index holds for this interpreter, what commit each was built
from, read without downloading it, and the download itself.

A PEP 503 index page lists a project's files (PyTorch's nightly index holds hundreds of 200 MB wheels). The commit a
wheel was built from sits in one small member, `torch/version.py`; a zip's directory is at its end, so two or three
HTTP range requests read it where a server honours `Range` (PyTorch's does), and a server that does not gets the
whole file read once.
"""

from __future__ import annotations

import re
import shutil
import struct
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from packaging.tags import sys_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

TIMEOUT = 120.0
_GIT_VERSION = re.compile(r"""^git_version\s*=\s*['"]([0-9a-f]{40})['"]""", re.MULTILINE)
_EOCD = b"PK\x05\x06"
_CENTRAL = b"PK\x01\x02"
_TAIL = 65_536 + 22  # the end record and the longest zip comment


class RemoteError(Exception):
    """An index or a wheel URL that could not be read; the message is one line naming the URL."""


@dataclass(frozen=True)
class RemoteWheel:
    url: str
    filename: str
    version: Version


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.hrefs.append(href)


def _open(url: str, headers: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=TIMEOUT)
    except urllib.error.HTTPError as exc:
        raise RemoteError(f"{_plain(url)}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise RemoteError(f"{_plain(url)}: {getattr(exc, 'reason', None) or exc}") from None


def _plain(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def compatible(index: str, project: str = "torch") -> list[RemoteWheel]:
    """The wheels of `project` on the PEP 503 index `index` that this interpreter can install, newest first."""
    page = index.rstrip("/") + f"/{project}/"
    with _open(page) as answer:
        parser = _Links()
        parser.feed(answer.read().decode("utf-8", "replace"))
    tags = set(sys_tags())
    found = []
    for href in parser.hrefs:
        url = urllib.parse.urljoin(page, href).split("#")[0]
        name = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
        try:
            dist, version, _build, wheel_tags = parse_wheel_filename(name)
        except InvalidWheelFilename:
            continue
        if dist == project and wheel_tags & tags:
            found.append(RemoteWheel(url, name, version))
    return sorted(found, key=lambda w: w.version, reverse=True)


def git_version(url: str) -> str:
    """The `torch.version.git_version` of the wheel at `url` ("" when it says none), read by range requests."""
    with _open(url, {"Range": f"bytes=-{_TAIL}"}) as answer:
        if answer.status != 206:  # the server sends the whole file: read it once
            return _git_version_of_whole(answer)
        tail = answer.read()
        total = int(answer.headers.get("Content-Range", "/0").rsplit("/", 1)[-1] or 0)
    end = tail.rfind(_EOCD)
    if end < 0 or not total:
        raise RemoteError(f"{_plain(url)}: not a zip archive (no end of central directory)")
    size, offset = struct.unpack("<II", tail[end + 12 : end + 20])
    if offset == 0xFFFFFFFF:  # a zip64 directory: read the whole file once
        with _open(url) as whole:
            return _git_version_of_whole(whole)
    start = total - len(tail)
    directory = tail[offset - start : offset - start + size] if offset >= start else _range(url, offset, size)
    member = _member(directory, "torch/version.py")
    if member is None:
        return ""
    method, compressed, local = member
    header = _range(url, local, 30)
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    data = _range(url, local + 30 + name_length + extra_length, compressed)
    text = zlib.decompress(data, -15) if method == 8 else data
    return commit_in(text.decode("utf-8", "replace"))


def _range(url: str, offset: int, length: int) -> bytes:
    with _open(url, {"Range": f"bytes={offset}-{offset + length - 1}"}) as answer:
        if answer.status != 206:
            raise RemoteError(f"{_plain(url)}: the server stopped honouring range requests")
        return answer.read()


def _member(directory: bytes, wanted: str) -> tuple[int, int, int] | None:
    """(compression method, compressed size, local header offset) of `wanted` in a zip's central directory."""
    at = 0
    while directory.startswith(_CENTRAL, at):
        method = struct.unpack("<H", directory[at + 10 : at + 12])[0]
        compressed = struct.unpack("<I", directory[at + 20 : at + 24])[0]
        name_length, extra_length, comment_length = struct.unpack("<HHH", directory[at + 28 : at + 34])
        local = struct.unpack("<I", directory[at + 42 : at + 46])[0]
        name = directory[at + 46 : at + 46 + name_length].decode("utf-8", "replace")
        if name == wanted:
            return method, compressed, local
        at += 46 + name_length + extra_length + comment_length
    return None


def _git_version_of_whole(answer) -> str:  # type: ignore[no-untyped-def]
    with tempfile.TemporaryFile() as scratch:
        shutil.copyfileobj(answer, scratch)
        try:
            with zipfile.ZipFile(scratch) as archive:
                return commit_in(archive.read("torch/version.py").decode("utf-8", "replace"))
        except (KeyError, zipfile.BadZipFile):
            return ""


def commit_in(version_py: str) -> str:
    """The `git_version` a torch build's `torch/version.py` names, "" when it names none."""
    found = _GIT_VERSION.search(version_py)
    return found.group(1) if found else ""


def download(url: str, folder: Path) -> Path:
    """The file at `url` (or a local path) in `folder` under its own name; written aside and renamed when whole."""
    name = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
    target = folder / name
    partial = folder / f".{name}.part"
    folder.mkdir(parents=True, exist_ok=True)
    source = Path(url)
    if "://" not in url:
        if not source.is_file():
            raise RemoteError(f"{url}: no such wheel file")
        shutil.copyfile(source, partial)
    else:
        with _open(url) as answer, partial.open("wb") as out:
            shutil.copyfileobj(answer, out, 1 << 20)
    partial.replace(target)
    return target
