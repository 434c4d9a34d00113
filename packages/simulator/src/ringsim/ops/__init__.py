"""The device's declared op set: registry, numerics and the eager kernels that run as Ring-32 programs."""

from ringsim.ops.register import register
from ringsim.ops.registry import SPECS, Kind, OpSpec, Tolerance

__all__ = ["SPECS", "Kind", "OpSpec", "Tolerance", "register"]
