"""Evidence-driven selection of upstream PyTorch tests for a privateuse1 backend."""

from importlib.metadata import version as _version

__version__ = _version("tributary-selector")
