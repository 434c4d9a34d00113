"""Ring-32: a simulated dataflow accelerator exposed to PyTorch as the privateuse1 device 'ring'."""

from importlib.metadata import version as _version

# torch first: its autoload imports ringsim.backend, which must not find ringsim half-initialised.
import torch  # noqa: F401

from ringsim.backend import autoload as _autoload

_autoload()

from ringsim.capabilities import capabilities  # noqa: E402
from ringsim.profiling import profile, reset_stats, stats  # noqa: E402

__version__ = _version("tributary-simulator")
__all__ = ["capabilities", "profile", "reset_stats", "stats"]
