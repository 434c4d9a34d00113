"""torch.compile backend for the Ring-32 reference accelerator: `import ring_inductor` and compile as usual."""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from ring_inductor import config
from ring_inductor.errors import UnsupportedError
from ring_inductor.register import register

register()

try:
    __version__ = _version("tributary-compiler")
except PackageNotFoundError:  # run from a source tree on PYTHONPATH
    __version__ = "0+source"
__all__ = ["UnsupportedError", "config", "register"]
