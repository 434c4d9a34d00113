"""Run one test in a forked child so a segfault, abort or hang costs that test only, not the run."""

from __future__ import annotations

import json
import os
import selectors
import signal
import time
from dataclasses import dataclass

import pytest
from _pytest.runner import runtestprotocol

CRASH_EXIT = 70


@dataclass(frozen=True)
class Death:
    """How a child ended without reporting: a signal name, an exit code, or a timeout."""

    kind: str
    detail: str

    def message(self) -> str:
        return {
            "signal": f"test process killed by {self.detail}",
            "timeout": f"test exceeded the {self.detail} s timeout and was killed",
            "exit": f"test process exited with status {self.detail} before reporting",
        }[self.kind]


def run_forked(
    item: pytest.Item, nextitem: pytest.Item | None, timeout: float
) -> tuple[list[pytest.TestReport], Death | None]:
    """Reports as pytest would have made them in-process, or synthesized failure reports and how the child died."""
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        _child(item, nextitem, write_fd)
    os.close(write_fd)
    payload, death = _wait(pid, read_fd, timeout)
    if death is None:
        try:
            config = item.config
            data = json.loads(payload)
            return [config.hook.pytest_report_from_serializable(config=config, data=d) for d in data], None
        except (json.JSONDecodeError, TypeError, KeyError):
            death = Death("exit", "0 (unreadable report)")
    return _synthesized(item, death, time.monotonic() - started), death


def _child(item: pytest.Item, nextitem: pytest.Item | None, write_fd: int) -> None:
    """Never returns. One intra-op thread: an OpenMP pool inherited across fork deadlocks on first use."""
    status = CRASH_EXIT
    try:
        import torch

        torch.set_num_threads(1)
        reports = runtestprotocol(item, log=False, nextitem=nextitem)
        config = item.config
        data = [config.hook.pytest_report_to_serializable(config=config, report=r) for r in reports]
        encoded = json.dumps(data).encode()
        view = memoryview(encoded)
        while view:
            view = view[os.write(write_fd, view) :]
        status = 0
    finally:
        os._exit(status)


def _wait(pid: int, read_fd: int, timeout: float) -> tuple[bytes, Death | None]:
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    timed_out = False
    with selectors.DefaultSelector() as selector:
        selector.register(read_fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                break
            if not selector.select(remaining):
                continue
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        return b"", Death("timeout", f"{timeout:g}")
    if os.WIFSIGNALED(status):
        return b"", Death("signal", signal.Signals(os.WTERMSIG(status)).name)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        return b"", Death("exit", str(code))
    return b"".join(chunks), None


def _synthesized(item: pytest.Item, death: Death, duration: float) -> list[pytest.TestReport]:
    keywords = {name: 1 for name in item.keywords}
    common = {"nodeid": item.nodeid, "location": item.location, "keywords": keywords, "sections": []}
    props = list(item.user_properties)
    return [
        pytest.TestReport(**common, outcome="passed", longrepr=None, when="setup", user_properties=props),
        pytest.TestReport(
            **common, outcome="failed", longrepr=death.message(), when="call", duration=duration, user_properties=props
        ),
        pytest.TestReport(**common, outcome="passed", longrepr=None, when="teardown", user_properties=props),
    ]
