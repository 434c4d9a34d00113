"""ring_inductor's options: where to dump each kernel's program and decisions, and which solver places tiles."""

from __future__ import annotations

import os

#: A directory that receives `<kernel>.json` (the program) and `<kernel>.decisions.json` for every compiled kernel;
#: None (the default) dumps nothing. The environment variable RING_INDUCTOR_DUMP sets it at import.
dump_dir: str | None = os.environ.get("RING_INDUCTOR_DUMP") or None

#: How each kernel's chunk tiles are placed in a core's scratchpad: `best-fit` (the default), `greedy`, `cp-sat`
#: (exact, 2 s a kernel) or `stacked` (the no-reuse baseline). The environment variable RING_INDUCTOR_SCRATCHPAD
#: sets it at import.
scratchpad_solver: str = os.environ.get("RING_INDUCTOR_SCRATCHPAD") or "best-fit"

#: Whether strided operands of compiled kernels are made contiguous by relayout programs the simulator times
#: (`relayout`), or by the device's untimed copy (False: the baseline). RING_INDUCTOR_RELAYOUT=0 turns them off.
relayout_programs: bool = os.environ.get("RING_INDUCTOR_RELAYOUT", "1") != "0"

#: Whether a matmul's pointwise consumers may join its kernel when the co-optimiser finds the product cheaper kept
#: resident than spilled (`fusion`); False always spills (the baseline). RING_INDUCTOR_FUSE_MATMUL=0 turns it off.
fuse_matmul_epilogues: bool = os.environ.get("RING_INDUCTOR_FUSE_MATMUL", "1") != "0"

#: Whether the layout pass keeps a matmul's right operand in the stick layout it is stored in where the matmul reads
#: it so (`sticks`: a linear layer's weight, attention's transposed keys, read along K); False relays every right
#: operand into N-sticks first (the baseline). RING_INDUCTOR_LAYOUT=0 turns it off.
layout_pass: bool = os.environ.get("RING_INDUCTOR_LAYOUT", "1") != "0"
