"""Headless Chromium for the tests that check what a page really shows (the run report, the relay's HUD).

One place finds (or, as root, installs) Debian's chromium and holds the flags that keep it offline and quiet, so
every browser test starts it the same way and skips with the same reason when it cannot.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

#: Flags for a one-shot offline render: no sandbox (containers), no GPU, no network of its own, no first-run UI.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def find_chromium() -> str | None:
    """Debian's chromium, installed when missing and we are root; None if it cannot be had."""
    found = shutil.which("chromium")
    if found or os.geteuid() != 0 or shutil.which("apt-get") is None:
        return found
    try:
        subprocess.run(["apt-get", "update", "-qq"], check=True, capture_output=True, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True, capture_output=True, timeout=1200)
    except (OSError, subprocess.SubprocessError):
        return None
    return shutil.which("chromium")


def pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """A PNG's width, height and RGB(A) scanlines, un-filtered (stdlib zlib + struct; 8-bit RGB or RGBA only)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, body = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8, "8-bit PNG expected"
    assert colour in (2, 6), "RGB or RGBA PNG expected"
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prior = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = prior[i]
            corner = prior[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                predictor = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + predictor) & 0xFF
        rows.append(bytes(line))
        prior = line
    return width, height, [bytes(r[i : i + 3]) for r in rows for i in range(0, stride, bpp)]


def chromium_or_skip() -> str:
    """The chromium binary, or skip the test saying how to get one."""
    found = find_chromium()
    if found is None:
        pytest.skip("chromium is not installed and cannot be (not root, or apt-get failed): `apt-get install chromium`")
    return found


def headless(chromium: str, profile: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run chromium once with FLAGS, its own profile directory and `args`; skip if it cannot be started."""
    command = [chromium, *FLAGS, f"--user-data-dir={profile}", *args]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"chromium could not be started: {exc}")
