"""Where a shard's pytest runs: a local process group (`process`), or a fresh container per shard (`docker`).

A container sees only what the shard needs, at the same paths as on the host, so no path in a command or a result
needs translating: the combination's environment and the Python it was made from (read-only), the suite and its
configs (read-only), and the combination's work directory (writable, where results land). It has no network. The
image is the project's locally built Debian base (`infra/build-base-image.sh`); no image is pulled. Environment
values reach the container by name (`docker run -e NAME`, the value taken from the client's environment), so none
appears on a command line.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_IMAGE = "tributary-base:bookworm"
#: Host variables that describe the host, not the test: the container keeps its own.
HOST_ONLY = frozenset({"PATH", "HOME", "HOSTNAME", "PWD", "OLDPWD", "SHLVL", "TMPDIR", "TERM", "DISPLAY", "_"})
ENGINE_WAIT = 30.0
#: Seconds `docker create` may take on a loaded engine before the shard counts as not started.
CREATE_WAIT = 120.0


class IsolationError(Exception):
    """The chosen isolation cannot run here: one line saying why and what to do."""


@dataclass(frozen=True)
class Completed:
    returncode: int
    output: str
    timed_out: bool = False


@dataclass(frozen=True)
class Mounts:
    """Host paths a shard reads and writes; a container mounts each at the same path."""

    read_only: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()


class ProcessIsolation:
    """A child in its own process group, killed with everything it started when the timeout passes."""

    name = "process"

    def run(
        self, argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float | None, mounts: Mounts = Mounts()
    ) -> Completed:
        return _supervise(list(argv), cwd, dict(env), timeout, on_timeout=lambda: None)


@dataclass(frozen=True)
class DockerIsolation:
    """Each call in a new container of `image`, removed when it ends; a timeout removes the container itself."""

    image: str = DEFAULT_IMAGE
    name = "docker"

    def run(
        self, argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float | None, mounts: Mounts = Mounts()
    ) -> Completed:
        container = f"tributary-shard-{uuid.uuid4().hex[:12]}"
        passed = {k: v for k, v in env.items() if k not in HOST_ONLY and "\0" not in v}
        passed["HOME"] = "/tmp"
        command = ["docker", "create", "--init", "--network", "none", "--name", container,
                   "--user", f"{os.getuid()}:{os.getgid()}", "--workdir", str(cwd)]  # fmt: skip
        for path in _outermost(mounts.read_only):
            command += ["--mount", f"type=bind,source={path},target={path},readonly"]
        for path in _outermost(mounts.writable):
            command += ["--mount", f"type=bind,source={path},target={path}"]
        for name in sorted(passed):
            command += ["--env", name]
        command += [self.image, *argv]
        client_env = {**os.environ, **passed}
        # Created before it starts and removed by name after, whatever became of the client: a container the
        # engine was still creating when a timeout killed `docker run` would otherwise outlive the shard.
        try:
            created = _docker(command, client_env, CREATE_WAIT)
            if created.returncode:
                return Completed(created.returncode, created.stdout + created.stderr)
            attach = ["docker", "start", "--attach", container]
            return _supervise(attach, cwd, client_env, timeout, on_timeout=lambda: _remove(container))
        finally:
            _remove(container)

    def check(self, repo: Path, log: Path) -> None:
        """Make sure an engine answers (starting dockerd when this user may) and the image exists (building it
        with the repository's `infra/build-base-image.sh` when it does not)."""
        if shutil.which("docker") is None:
            raise IsolationError("--isolation docker: no docker client on PATH (install docker.io, or use process)")
        if not _engine_answers():
            _start_engine(log)
        if subprocess.run(["docker", "image", "inspect", self.image], capture_output=True, check=False).returncode:
            _build_image(self.image, repo, log)


def isolation(name: str, image: str = DEFAULT_IMAGE) -> ProcessIsolation | DockerIsolation:
    """The isolation called `name` (`process` or `docker`)."""
    if name == "process":
        return ProcessIsolation()
    if name == "docker":
        return DockerIsolation(image)
    raise IsolationError(f"unknown isolation {name!r} (expected process or docker)")


def interpreter_prefix(python: Path) -> Path:
    """The installation a virtual environment's interpreter comes from (its files are needed in a container)."""
    done = subprocess.run([str(python), "-c", "import sys; print(sys.base_prefix)"], capture_output=True, text=True,
                          check=False)  # fmt: skip
    if done.returncode != 0 or not done.stdout.strip():
        raise IsolationError(f"cannot ask {python} for its base prefix: {done.stderr.strip()[-200:]}")
    return Path(done.stdout.strip())


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """Existing absolute paths, dropping any inside another (a nested bind mount would shadow its parent's view)."""
    chosen: list[Path] = []
    for path in sorted({Path(p).resolve() for p in paths if Path(p).exists()}, key=lambda p: len(p.parts)):
        if not any(path.is_relative_to(outer) for outer in chosen):
            chosen.append(path)
    return chosen


def _supervise(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float | None, on_timeout: Callable[[], None]
) -> Completed:
    with subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        errors="replace", start_new_session=True,
    ) as child:  # fmt: skip
        try:
            output, _ = child.communicate(timeout=timeout)
            return Completed(child.returncode, output)
        except subprocess.TimeoutExpired:
            on_timeout()
            os.killpg(child.pid, signal.SIGKILL)
            output, _ = child.communicate()
            return Completed(-int(signal.SIGKILL), output, timed_out=True)


def _docker(command: list[str], env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(command, env=env, capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(command, 125, "", f"{' '.join(command[:2])}: no answer in {timeout:.0f} s")


def _remove(container: str) -> None:
    """Kill and remove `container`, returning once the engine has (a no-op when it does not exist)."""
    _docker(["docker", "rm", "--force", container], os.environ, 60)


def _engine_answers() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True, check=False, timeout=60).returncode == 0


def _start_engine(log: Path) -> None:
    dockerd = shutil.which("dockerd")
    if dockerd is None or os.geteuid() != 0:
        raise IsolationError(
            "--isolation docker: no Docker engine answers and this user cannot start one "
            f"({'dockerd is not installed' if dockerd is None else 'starting dockerd needs root'}); "
            "start dockerd, or use --isolation process"
        )
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        subprocess.Popen([dockerd], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + ENGINE_WAIT
    while time.monotonic() < deadline:
        if _engine_answers():
            return
        time.sleep(1)
    raise IsolationError(f"--isolation docker: dockerd did not answer within {ENGINE_WAIT:.0f} s (its log: {log})")


def _build_image(image: str, repo: Path, log: Path) -> None:
    script = repo / "infra" / "build-base-image.sh"
    if not script.exists():
        raise IsolationError(f"--isolation docker: image {image} is missing and {script} does not exist to build it")
    print(f"building the container image {image} with {script} (a few minutes, once)", file=sys.stderr)
    with log.open("ab") as out:
        done = subprocess.run([str(script), "--tag", image], stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise IsolationError(f"--isolation docker: building {image} failed (its log: {log})")
