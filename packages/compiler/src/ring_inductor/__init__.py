"""torch.compile backend for the Ring-32 reference accelerator: installed, it compiles ring tensors after `import
torch` alone (its `torch.backends` entry point); `import ring_inductor` does the same where autoload is off."""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from ring_inductor import config
from ring_inductor.autoload import autoload
from ring_inductor.errors import UnsupportedError

autoload()  # registers with the first compile: importing ring_inductor does not import Inductor

try:
    __version__ = _version("tributary-compiler")
except PackageNotFoundError:  # run from a source tree on PYTHONPATH
    __version__ = "0+source"
__all__ = ["UnsupportedError", "autoload", "config"]
