"""What a container must see for its pip to behave like this host's pip.

A "fresh machine of this kind" still has the machine's pip configuration: its config files, the wheel folders,
file:// indexes, constraint files and CA bundle they name, and the PIP_* (and CA/proxy) environment variables.
pip itself reports which config files it reads (`pip config debug`), so nothing here hard-codes a host path.
Prints `docker run` arguments, one per line, for infra/run-in-container.sh.
"""

from __future__ import annotations

import argparse
import configparser
import enum
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn
from urllib.parse import unquote, urlparse

# Variables the container inherits besides PIP_* and UV_*: where the trusted CAs are and how to reach the network.
PASSED_VARIABLES = (
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)
PASSED_PREFIXES = ("PIP_", "UV_")
# A PEP 503 index page links its files relative to itself (e.g. ../../files/x.whl), so an index's parent is mounted.
INDEX_KEYS = ("index-url", "extra-index-url")
SCOPES = ("env", "global", "site", "user")


class ExitCode(enum.IntEnum):
    OK = 0
    PIP_CONFIG_ERROR = 1
    USAGE = 2


class PipContextError(Exception):
    """A one-line reason the host's pip configuration cannot be carried into a container."""


@dataclass(frozen=True)
class ConfigFile:
    scope: str
    path: Path
    exists: bool


@dataclass(frozen=True)
class Mount:
    source: Path
    target: Path


@dataclass(frozen=True)
class PipContext:
    mounts: tuple[Mount, ...]
    env: tuple[tuple[str, str], ...]


def parse_config_debug(text: str) -> list[ConfigFile]:
    """The config files listed by `pip config debug`, with the scope each is read in."""
    files: list[ConfigFile] = []
    scope = None
    for line in text.splitlines():
        if line and not line[0].isspace() and line.endswith(":"):
            scope = line[:-1]
        elif scope in SCOPES and line.startswith("  ") and not line.startswith("    ") and ", exists: " in line:
            path, _, exists = line.strip().rpartition(", exists: ")
            files.append(ConfigFile(scope, Path(path), exists == "True"))
    return files


def read_config_files(pip: Sequence[str], environ: Mapping[str, str]) -> list[ConfigFile]:
    """Ask pip (run as `pip`, in `environ`) which configuration files it reads."""
    try:
        done = subprocess.run([*pip, "config", "debug"], env=dict(environ), capture_output=True, text=True, check=False)
    except OSError as exc:
        raise PipContextError(f"cannot run {' '.join(pip)}: {exc.strerror}") from exc
    if done.returncode != 0:
        lines = [ln.strip() for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
        raise PipContextError(f"{' '.join(pip)} config debug failed: " + (" ".join(lines) or f"exit {done.returncode}"))
    return parse_config_debug(done.stdout)


def config_values(path: Path) -> list[tuple[str, str]]:
    """Every (key, value) in a pip config file, all sections, read the way pip reads it (RawConfigParser)."""
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError) as exc:
        reason = str(exc).splitlines()[0]
        raise PipContextError(f"{path}: cannot read pip configuration: {reason}") from exc
    return [(key, value) for section in parser.sections() for key, value in parser.items(section)]


def named_paths(key: str, value: str) -> list[Path]:
    """The existing absolute paths a config value names: plain paths and file:// URLs, several per value."""
    paths = []
    for token in value.split():
        path = Path(unquote(urlparse(token).path)) if token.startswith("file:") else Path(token)
        if not path.is_absolute() or not path.exists():
            continue
        if key.replace("_", "-") in INDEX_KEYS:
            path = path.parent
        paths.append(path)
    return paths


def config_file_target(file: ConfigFile, host_home: Path, container_home: Path, container_prefix: Path) -> Path:
    """Where the container's pip looks for this file: user files under its home, site files in its prefix."""
    if file.scope == "user":
        try:
            return container_home / file.path.relative_to(host_home)
        except ValueError:
            return container_home / ".config" / "pip" / "pip.conf"
    if file.scope == "site":
        return container_prefix / "pip.conf"
    return file.path


def passed_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The host variables the container inherits."""
    return {
        name: value
        for name, value in sorted(environ.items())
        if name.startswith(PASSED_PREFIXES) or name in PASSED_VARIABLES
    }


def pip_context(
    files: Sequence[ConfigFile], environ: Mapping[str, str], container_home: Path, container_prefix: Path
) -> PipContext:
    """Read-only mounts and variables that give a container this host's pip configuration."""
    host_home = Path(environ.get("HOME", "~")).expanduser()
    env = passed_environment(environ)
    targets: dict[Path, Path] = {}
    named: list[Path] = []
    for file in (f for f in files if f.exists):
        targets[config_file_target(file, host_home, container_home, container_prefix)] = file.path
        for key, value in config_values(file.path):
            named.extend(named_paths(key, value))
    for name, value in env.items():
        key = name.removeprefix("PIP_").lower() if name.startswith("PIP_") else name
        named.extend(named_paths(key, value))
    for path in named:
        targets.setdefault(path, path)
    mounts = []
    for target, source in sorted(targets.items()):
        if target == Path("/") or source == Path("/"):
            raise PipContextError("pip's configuration names the root directory; refusing to mount /")
        if covered(target, mounts):
            continue
        mounts.append(Mount(source, target))
    return PipContext(tuple(mounts), tuple(env.items()))


def covered(target: Path, mounts: Sequence[Mount]) -> bool:
    """True when an identity mount of a parent folder already shows `target` at the same place."""
    return any(m.source == m.target and target.is_relative_to(m.target) for m in mounts)


def docker_arguments(context: PipContext) -> list[str]:
    """`docker run` arguments for the context: one --mount per path, one --env per variable."""
    args = []
    for mount in context.mounts:
        for path in (mount.source, mount.target):
            if any(ch in str(path) for ch in ",\n"):
                raise PipContextError(f"{path}: a path with a comma or newline cannot be bind-mounted")
        args.append(f"--mount=type=bind,source={mount.source},target={mount.target},readonly")
    for name, value in context.env:
        if "\n" in value:
            raise PipContextError(f"{name}: a variable holding a newline cannot be passed")
        args.append(f"--env={name}={value}")
    return args


class UsageError(Exception):
    """A bad command line, reported in one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    codes = ", ".join(f"{code.value} {code.name.lower()}" for code in ExitCode)
    parser = _Parser(
        prog="pip_context.py",
        description="Print docker run arguments that give a container this host's pip configuration.",
        epilog=f"exit codes: {codes}",
    )
    parser.add_argument("--container-home", type=Path, default=Path("/root"), help="HOME inside the container")
    parser.add_argument("--container-prefix", type=Path, default=Path("/usr"), help="sys.prefix of its python")
    parser.add_argument("--python", default=sys.executable, help="the host python whose pip is mirrored")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    try:
        files = read_config_files([args.python, "-m", "pip"], os.environ)
        context = pip_context(files, os.environ, args.container_home, args.container_prefix)
        print("\n".join(docker_arguments(context)))
    except PipContextError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.PIP_CONFIG_ERROR
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
