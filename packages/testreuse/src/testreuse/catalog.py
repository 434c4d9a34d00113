"""Names torch's own test machinery knows: OpInfo full names in op_db and python_ref_db (`_refs.*`), and ModuleInfo
names in module_db."""

from __future__ import annotations

import functools

from testreuse import torchbridge


@functools.cache
def op_names() -> frozenset[str]:
    """Importing op_db is slow and must follow backend registration, so it happens on first use."""
    return frozenset(op.full_name for op in (*torchbridge.op_db(), *torchbridge.python_ref_db()))


@functools.cache
def module_names() -> frozenset[str]:
    """ModuleInfo names, imported on first use like op_names."""
    return frozenset(info.name for info in torchbridge.module_db())


@functools.cache
def dtype_names() -> frozenset[str]:
    """Every torch dtype by its canonical name (aliases such as `float` resolve to `float32`)."""
    import torch

    return frozenset(str(v).removeprefix("torch.") for v in vars(torch).values() if isinstance(v, torch.dtype))
