"""Fault injection, so CI tooling can be tested against a device that crashes, hangs, flakes or lies.

Off by default. `RINGSIM_FAULT=KIND@N[,KIND@N...]` or `inject(KIND, N)` arms a fault at the N-th kernel launched in
this process (counting from 1): `abort` kills the process with SIGABRT, `hang` blocks forever, `transient` raises
TransientDeviceError, `wrong` lets the kernel run and then corrupts what it wrote.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Literal

from ringsim import replay

ENV_VAR = "RINGSIM_FAULT"
FAULT_KINDS = ("abort", "hang", "transient", "wrong")
FaultKind = Literal["abort", "hang", "transient", "wrong"]


class TransientDeviceError(RuntimeError):
    """A kernel failed in a way a retry may not repeat (injected)."""


class FaultConfigError(ValueError):
    """The fault specification (environment variable or API call) is malformed."""


_lock = threading.Lock()
_armed: dict[int, FaultKind] | None = None
_launched = 0


def parse_spec(text: str, source: str = ENV_VAR) -> dict[int, FaultKind]:
    """Parse `KIND@N[,KIND@N...]`; an empty string arms nothing."""
    armed: dict[int, FaultKind] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        kind, sep, count = item.partition("@")
        if not sep or kind not in FAULT_KINDS or not count.isdigit() or int(count) < 1:
            raise FaultConfigError(
                f"{source}: invalid fault {item!r}: expected KIND@N, KIND one of {', '.join(FAULT_KINDS)}, N >= 1"
            )
        if int(count) in armed:
            raise FaultConfigError(f"{source}: two faults armed at kernel {count}")
        armed[int(count)] = kind  # type: ignore[assignment]
    return armed


def _faults() -> dict[int, FaultKind]:
    global _armed
    if _armed is None:
        _armed = parse_spec(os.environ.get(ENV_VAR, ""))
    return _armed


def inject(kind: FaultKind, at_kernel: int) -> None:
    """Arm `kind` at the `at_kernel`-th kernel launched in this process (see `kernels_launched()`)."""
    if kind not in FAULT_KINDS:
        raise FaultConfigError(f"inject: unknown fault kind {kind!r} (expected one of {', '.join(FAULT_KINDS)})")
    if not isinstance(at_kernel, int) or at_kernel < 1:
        raise FaultConfigError(f"inject: at_kernel must be an integer >= 1, got {at_kernel!r}")
    with _lock:
        _faults()[at_kernel] = kind
        _sync_replay()


def load_env() -> None:
    """Re-read RINGSIM_FAULT now (it is otherwise read at the first launch), replacing every armed fault."""
    global _armed
    armed = parse_spec(os.environ.get(ENV_VAR, ""))
    with _lock:
        _armed = armed
        _sync_replay()


def clear() -> None:
    """Disarm every fault, including those from the environment."""
    global _armed
    with _lock:
        _armed = {}
        _sync_replay()


def kernels_launched() -> int:
    """Kernels launched in this process so far; faults count against this, and `reset_stats()` does not reset it."""
    return _launched + replay.launches()


def _sync_replay() -> None:
    """Keep calls out of the native replay while a fault is armed for a launch still to come."""
    launched = kernels_launched()
    replay.block(replay.FAULTS_PENDING, any(number > launched for number in _faults()))


def on_launch() -> FaultKind | None:
    """Count one kernel launch and fire the fault armed for it. Returns 'wrong' when the result must be corrupted."""
    global _launched
    with _lock:
        _launched += 1
        number = kernels_launched()
        kind = _faults().get(number)
        _sync_replay()
    if kind is None or kind == "wrong":
        return kind
    message = f"ringsim: injected fault {kind!r} at kernel {number}"
    if kind == "transient":
        raise TransientDeviceError(f"{message}: transient device error, the kernel did not run")
    print(message, file=sys.stderr, flush=True)
    if kind == "abort":
        os.abort()
    while True:  # hang: a device that never answers
        time.sleep(3600)
