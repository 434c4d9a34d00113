"""The Ring-32 execution engine: programs in, checked, timed by the performance model, executed on real bytes."""

from .errors import ProgramError
from .launch import CACHE_SIZE, Plan, clear_cache, launch, launch_cached, plan
from .model import DEFAULT_MODEL, DeviceModel
from .program import FORMAT, Program, parse_program
from .report import KernelReport
from .timing import CoreBusy

__all__ = [
    "CACHE_SIZE",
    "DEFAULT_MODEL",
    "FORMAT",
    "CoreBusy",
    "DeviceModel",
    "KernelReport",
    "Plan",
    "Program",
    "ProgramError",
    "clear_cache",
    "launch",
    "launch_cached",
    "parse_program",
    "plan",
]
