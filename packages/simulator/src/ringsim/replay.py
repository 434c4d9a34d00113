"""The native replay of cached kernel calls (``ringsim._C``): when calls may bypass Python, and its launch counts.

A replayed call charges its kernel to the cumulative stats and counts against armed faults like a Python launch.
While a fault is pending or a profile is active every call runs in Python, so both see each launch as it happens.
"""

from __future__ import annotations

import os

from ringsim import _C

#: Reasons (bits) that send every call through Python.
FAULTS_PENDING = 1
PROFILING = 2
TURNED_OFF = 4
#: Set to 0 to run every call through the Python kernels (a baseline for benchmarks, a suspect for bug reports).
ENV_VAR = "RINGSIM_NATIVE_REPLAY"

block = _C.replay_block
launches = _C.replay_launches
drain = _C.replay_drain
clear = _C.replay_clear
install = _C.replay_install
run = _C.replay_run
set_lock = _C.replay_set_lock

block(TURNED_OFF, os.environ.get(ENV_VAR, "1") == "0")
