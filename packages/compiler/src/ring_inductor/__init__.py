"""torch.compile backend for the Ring-32 reference accelerator: `import ring_inductor` and compile as usual."""

from importlib.metadata import version as _version

from ring_inductor import config
from ring_inductor.errors import UnsupportedError
from ring_inductor.register import register

register()

__version__ = _version("tributary-compiler")
__all__ = ["UnsupportedError", "config", "register"]
