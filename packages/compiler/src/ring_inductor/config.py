"""ring_inductor's options: where to dump each kernel's program and decisions for review."""

from __future__ import annotations

import os

#: A directory that receives `<kernel>.json` (the program) and `<kernel>.decisions.json` for every compiled kernel;
#: None (the default) dumps nothing. The environment variable RING_INDUCTOR_DUMP sets it at import.
dump_dir: str | None = os.environ.get("RING_INDUCTOR_DUMP") or None
