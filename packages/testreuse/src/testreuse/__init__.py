"""Declarative reuse of upstream PyTorch tests on any privateuse1 device."""

from importlib.metadata import version as _version

__version__ = _version("tributary-testreuse")
