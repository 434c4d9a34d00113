"""A bound program's actions in the form the native replay takes (``ringsim._C.replay_install``).

DMA and ring transfers become byte ranges of scratchpad tiles; a compute names its aten overload and carries its
arguments with the attrs filled in, so the replay calls the same overload on the same tiles, widened as `call`
widens them. A program using an engine fn the replay cannot express (the index pair) has no export.
"""

from __future__ import annotations

from typing import Any

from ringsim import torchbridge

from .compute import ENGINE_FNS, TILES_AS
from .dtypes import widened
from .executor import Action


def export(actions: tuple[Action, ...]) -> list[tuple[Any, ...]] | None:
    """The replay actions of a bound program, or None when one of its computes cannot be replayed natively."""
    links: dict[tuple[int, int], int] = {}
    exported: list[tuple[Any, ...]] = []
    for action in actions:
        if action.kind in ("dma_in", "dma_out"):
            kind = "in" if action.kind == "dma_in" else "out"
            exported.append((kind, action.buffer, action.start, action.end, action.tile_bytes))
        elif action.kind in ("send", "recv"):
            exported.append((action.kind, links.setdefault(action.link, len(links)), action.tile_bytes))
        else:
            step = _compute(action)
            if step is None:
                return None
            exported.append(step)
    return exported


def _compute(action: Action) -> tuple[Any, ...] | None:
    attrs = dict(action.attrs or {})
    if action.name in ("copy", "cast"):
        return (action.name, action.inputs, action.outputs, attrs.get("dtype"))
    if action.name in ENGINE_FNS:
        return None
    names = attrs.pop(TILES_AS, None)
    tiles, attrs = widened(action.inputs, attrs)
    args, kwargs = ((), {**dict(zip(names, tiles, strict=True)), **attrs}) if names else (tuple(tiles), attrs)
    base, _, overload = action.name.partition(".")
    qualname = f"aten::{base}"
    if not overload:
        overload = torchbridge.resolve_overload(qualname, args, kwargs)
    overload = "" if overload == "default" else overload
    return ("op", qualname, overload, action.inputs, action.outputs, args, kwargs, names, action.copy_results)
