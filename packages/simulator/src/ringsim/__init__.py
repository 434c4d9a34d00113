"""Ring-32: a simulated dataflow accelerator exposed to PyTorch as the privateuse1 device 'ring'."""

from importlib.metadata import version as _version

from ringsim.backend import autoload as _autoload

_autoload()

__version__ = _version("tributary-simulator")
