"""The dtypes a Ring-32 tile or buffer may hold, by their program-format names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

#: Floating dtypes the device computes in (no float64, no complex).
FLOAT_DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
}

#: Integer and bool dtypes: indices, masks and the integer unit's exact arithmetic.
INDEX_DTYPES: dict[str, torch.dtype] = {
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int16": torch.int16,
}

#: float64 is held, compared and moved bit-exactly (printing and reference comparisons need it), never computed in
#: beyond the few exact ops the registry lists for it.
HELD_DTYPES: dict[str, torch.dtype] = {"float64": torch.float64}

DEVICE_DTYPES: dict[str, torch.dtype] = {**FLOAT_DTYPES, **INDEX_DTYPES, **HELD_DTYPES}
DTYPE_NAMES: dict[torch.dtype, str] = {dtype: name for name, dtype in DEVICE_DTYPES.items()}

#: Reduced-precision dtypes whose values are computed in float32 and rounded once on store.
WIDENED_DTYPES: frozenset[torch.dtype] = frozenset({torch.float16, torch.bfloat16})


def widened(tiles: Sequence[torch.Tensor], attrs: Mapping[str, Any]) -> tuple[list[torch.Tensor], dict[str, Any]]:
    """A compute fn's float16/bfloat16 tiles and `dtype=` as float32: it computes in float32 and its result is
    rounded once to its output tile (a narrow `dtype=` beside a widened tile would be refused as narrowing, as
    `linalg.vector_norm` refuses a float32 input with `dtype=bfloat16`)."""
    attrs = dict(attrs)
    if attrs.get("dtype") in WIDENED_DTYPES:
        attrs["dtype"] = torch.float32
    return [tile.float() if tile.dtype in WIDENED_DTYPES else tile for tile in tiles], attrs
