"""Scratchpad allocation: place each tile's live interval x address range in a core's scratchpad, or spill it.

Pluggable solvers (`SOLVERS`): greedy first-fit, best-fit, and an exact CP-SAT model with a time limit. Every
placement reports LOAD, the most bytes live at once (no placement can peak lower), and the bytes it spills.
"""

from .buffers import Buffer, Placement, load
from .lifetimes import core_buffers
from .solvers import SOLVERS, allocate

__all__ = ["SOLVERS", "Buffer", "Placement", "allocate", "core_buffers", "load"]
