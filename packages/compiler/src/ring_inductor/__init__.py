"""torch.compile backend for the Ring-32 reference accelerator."""

from importlib.metadata import version as _version

__version__ = _version("tributary-compiler")
