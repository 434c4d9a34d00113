"""Ring-32: a simulated dataflow accelerator exposed to PyTorch as the privateuse1 device 'ring'."""

from importlib.metadata import version as _version

__version__ = _version("tributary-simulator")
