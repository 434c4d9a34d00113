"""Crash isolation without a fork per test: a long-lived forked worker runs the session's items in the order the
parent sends them and answers each with its reports. When it dies (a signal, an exit) or overruns the per-test
timeout it is killed; the test it was running gets a failure naming the signal or the timeout, and the next test
starts a fresh worker forked from the parent, which never set up a fixture, so nothing half torn down carries over.
"""

from __future__ import annotations

import os
import pickle
import selectors
import signal
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import pytest

from testreuse.pytestbridge import hold_logged_reports, teardown_all

CRASH_EXIT = 70
_COMMAND = struct.Struct("!ii")  # item index, next item index (-1: none); item index -1: tear down and exit
_LENGTH = struct.Struct("!Q")
_FINISH = -1
_POLL = 0.5  # seconds between checks that a silent worker is still alive

Runner = Callable[[pytest.Item, pytest.Item | None], list[pytest.TestReport]]


@dataclass(frozen=True)
class Death:
    """How a worker ended without answering: a signal name, an exit code, or a timeout."""

    kind: str
    detail: str

    def message(self) -> str:
        return {
            "signal": f"test process killed by {self.detail}",
            "timeout": f"test exceeded the {self.detail} s timeout and was killed",
            "exit": f"test process exited with status {self.detail} before reporting",
        }[self.kind]


@dataclass
class _Child:
    pid: int
    commands: int
    replies: int
    selector: selectors.BaseSelector

    def reap(self, kill: bool) -> int:
        """Wait status of the child; its pipes closed."""
        if kill:
            os.kill(self.pid, signal.SIGKILL)
        self._close_pipes()
        return os.waitpid(self.pid, 0)[1]

    def exited(self) -> int | None:
        """Wait status if the child has exited (then reaped, pipes closed), else None. A process the test forked
        (a DataLoader worker) can hold the reply pipe open, so its end of file alone does not prove a death."""
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            return None
        self._close_pipes()
        return status

    def _close_pipes(self) -> None:
        self.selector.close()
        os.close(self.commands)
        os.close(self.replies)


class ForkedWorker:
    """One worker at a time for `items` (the session's list, the same in the parent and every fork)."""

    def __init__(self, items: Sequence[pytest.Item], runner: Runner, timeout: float) -> None:
        self.items = items
        self.runner = runner
        self.timeout = timeout
        self._index = {id(item): i for i, item in enumerate(items)}
        self._child: _Child | None = None

    def run(self, item: pytest.Item, nextitem: pytest.Item | None) -> tuple[list[pytest.TestReport], Death | None]:
        """The item's reports as pytest made them in the worker, or synthesized failure reports and the death."""
        started = time.monotonic()
        child = self._child or self._spawn()
        next_index = -1 if nextitem is None else self._index[id(nextitem)]
        payload, death = self._ask(child, _COMMAND.pack(self._index[id(item)], next_index))
        if death is None:
            config = item.config
            return [config.hook.pytest_report_from_serializable(config=config, data=d) for d in payload], None
        self._child = None
        return _synthesized(item, death, time.monotonic() - started), death

    def close(self, *, graceful: bool = True) -> None:
        """Let the worker tear down what it set up (module and class fixtures) and exit; kill it if it overruns
        the timeout, or at once when not `graceful` (an interrupted run)."""
        child, self._child = self._child, None
        if child is None:
            return
        if not graceful:
            child.reap(kill=True)
            return
        try:
            os.write(child.commands, _COMMAND.pack(_FINISH, _FINISH))
        except BrokenPipeError:
            child.reap(kill=False)
            return
        deadline = time.monotonic() + self.timeout
        while child.exited() is None:
            if time.monotonic() > deadline:
                child.reap(kill=True)
                return
            child.selector.select(_POLL)  # readable at end of file: the worker is (nearly) gone

    def _spawn(self) -> _Child:
        command_read, command_write = os.pipe()
        reply_read, reply_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(command_write)
            os.close(reply_read)
            _serve(self.items, self.runner, command_read, reply_write)
        os.close(command_read)
        os.close(reply_write)
        selector = selectors.DefaultSelector()
        selector.register(reply_read, selectors.EVENT_READ)
        self._child = _Child(pid, command_write, reply_read, selector)
        return self._child

    def _ask(self, child: _Child, command: bytes) -> tuple[Any, Death | None]:
        """Send one command and read the one framed answer, within the timeout."""
        try:
            os.write(child.commands, command)
        except BrokenPipeError:  # died while idle
            return None, _death(child.reap(kill=False))
        buffer = bytearray()
        need = _LENGTH.size
        deadline = time.monotonic() + self.timeout
        while len(buffer) < need:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                child.reap(kill=True)
                return None, Death("timeout", f"{self.timeout:g}")
            if not child.selector.select(min(remaining, _POLL)):
                if (status := child.exited()) is not None:
                    return None, _death(status)
                continue
            chunk = os.read(child.replies, 1 << 16)
            if not chunk:
                return None, _death(child.reap(kill=False))
            buffer += chunk
            if need == _LENGTH.size and len(buffer) >= need:
                need += _LENGTH.unpack_from(buffer)[0]
        return pickle.loads(buffer[_LENGTH.size :]), None


def _serve(items: Sequence[pytest.Item], runner: Runner, commands: int, replies: int) -> NoReturn:
    """The worker's loop; never returns. One intra-op thread: an OpenMP pool inherited across fork deadlocks."""
    status = CRASH_EXIT
    try:
        import torch

        torch.set_num_threads(1)
        logged = hold_logged_reports(items[0].config)
        while (command := _read_exactly(commands, _COMMAND.size)) is not None:
            index, next_index = _COMMAND.unpack(command)
            if index == _FINISH:
                teardown_all(items[0].session)
                break
            item = items[index]
            logged.clear()
            reports = _in_order(runner(item, None if next_index < 0 else items[next_index]), logged)
            config = item.config
            data = [config.hook.pytest_report_to_serializable(config=config, report=r) for r in reports]
            body = pickle.dumps(data)  # keeps tuples (a skip's longrepr), which JUnit and -r insist on
            _write_all(replies, _LENGTH.pack(len(body)) + body)
        status = 0
    finally:
        os._exit(status)


def _in_order(reports: list[pytest.TestReport], logged: list[pytest.TestReport]) -> list[pytest.TestReport]:
    """The item's reports with those it logged while running (its subtests') before its call report, where pytest
    logs them."""
    call = next((i for i, r in enumerate(reports) if r.when == "call"), len(reports))
    return [*reports[:call], *logged, *reports[call:]]


def _read_exactly(fd: int, size: int) -> bytes | None:
    """`size` bytes, or None at end of file (the parent is gone or closed the pipe)."""
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _death(status: int) -> Death:
    if os.WIFSIGNALED(status):
        return Death("signal", signal.Signals(os.WTERMSIG(status)).name)
    return Death("exit", str(os.waitstatus_to_exitcode(status)))


def _synthesized(item: pytest.Item, death: Death, duration: float) -> list[pytest.TestReport]:
    """The reports pytest would show for a call that failed with the death as its message."""
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
