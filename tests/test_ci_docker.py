"""crcr's runner with `--isolation docker`: each shard in its own container from the project's base image, seeing
only its environment, the Python it was made from, its configs and its work directory. Skipped, saying why, where
no Docker engine answers or the base image (`infra/build-base-image.sh`) was never built."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from crcr.ci import runner
from crcr.ci.isolation import DEFAULT_IMAGE, DockerIsolation, Mounts, interpreter_prefix
from embedded import config_folder, ring_suite


def _why_not() -> str:
    if shutil.which("docker") is None:
        return "no docker client"
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode:
        return "no Docker engine answers (start dockerd)"
    if subprocess.run(["docker", "image", "inspect", DEFAULT_IMAGE], capture_output=True, check=False).returncode:
        return f"no {DEFAULT_IMAGE} image (infra/build-base-image.sh builds it)"
    started = subprocess.run(["docker", "run", "--rm", "--network", "none", DEFAULT_IMAGE, "true"],
                             capture_output=True, text=True, check=False)  # fmt: skip
    if started.returncode:
        return f"the engine cannot start a container here: {(started.stderr.strip().splitlines() or ['?'])[-1][:200]}"
    return ""


WHY_NOT = _why_not()
pytestmark = pytest.mark.skipif(bool(WHY_NOT), reason=WHY_NOT or "docker available")

PYTHON = Path(sys.executable)


def _leftover_containers() -> list[str]:
    names = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True).stdout
    return [n for n in names.split() if n.startswith("tributary-shard-")]


def test_a_command_runs_in_a_container_that_sees_only_its_mounts(tmp_path: Path) -> None:
    secret = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    secret.mkdir()
    (secret / "host-only.txt").write_text("not mounted")
    mounts = Mounts(read_only=(PYTHON.parent.parent, interpreter_prefix(PYTHON)), writable=(tmp_path,))
    probe = (
        "import os, pathlib, socket\n"
        "print('container', os.path.exists('/.dockerenv'))\n"
        f"print('secret', pathlib.Path({str(secret / 'host-only.txt')!r}).exists())\n"
        "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n    print('network yes')\n"
        "except OSError:\n    print('network no')\n"
        f"pathlib.Path({str(tmp_path / 'out.txt')!r}).write_text(os.environ['PROBE_VALUE'])\n"
    )
    done = DockerIsolation().run([str(PYTHON), "-c", probe], tmp_path, {"PROBE_VALUE": "a'b\"c $(x)"}, 120, mounts)
    assert done.returncode == 0, done.output
    assert done.output.split("\n")[:3] == ["container True", "secret False", "network no"]
    assert (tmp_path / "out.txt").read_text() == "a'b\"c $(x)"  # passed by name, never through a shell


@pytest.mark.parametrize("timeout", [5, 0.05])
def test_a_timeout_kills_the_container_not_only_its_client(tmp_path: Path, timeout: float) -> None:
    """Also when the timeout passes before the container has even started (a loaded engine)."""
    mounts = Mounts(read_only=(PYTHON.parent.parent, interpreter_prefix(PYTHON)), writable=(tmp_path,))
    done = DockerIsolation().run([str(PYTHON), "-c", "import time; time.sleep(600)"], tmp_path, {}, timeout, mounts)
    assert done.timed_out
    assert _leftover_containers() == []


def test_a_shard_in_a_container_keeps_its_results_when_the_device_aborts(tmp_path: Path) -> None:
    """The shard's process dies of a device abort inside its container; the finished tests' results are on the
    host, the rest rerun in a new container, and every selected test has an outcome."""
    configs = config_folder(tmp_path / "configs", "test_view_ops.yaml")
    local = ring_suite(configs)
    work = tmp_path / "work"
    collected = runner.collect(local, work)
    selected = collected.selected[:40]
    isolated = ring_suite(configs, isolation=DockerIsolation(), reads=(interpreter_prefix(PYTHON),))
    limits = runner.Limits(parallel=1, retries=0, test_timeout=60, shard_timeout=900)
    dies = {"RINGSIM_FAULT": "abort@30", "PYTEST_ADDOPTS": "--testreuse-isolation none"}
    shard = runner.run_shard(isolated, 1, selected, selected, limits, work, extra_env=dies)
    assert shard.result.reran
    assert shard.result.exit_status not in runner.FINISHED  # the container's process died of the abort
    outcomes = [runner.outcome_of(shard.records.get(n)) for n in selected]
    assert "passed" in outcomes  # finished before the abort, in the first container: kept on the host
    assert set(outcomes) <= {"passed", "xfailed", "skipped", "crashed", "not_run"}
    log = (work / "shard-1" / "pytest.log").read_text()
    assert "==== run: exit" in log
    assert "==== rerun: exit" in log
    assert _leftover_containers() == []
