"""Client of PyTorch's Cross-Repository CI Relay: gate dispatches, send callbacks."""

from importlib.metadata import version as _version

__version__ = _version("tributary-dispatch")
