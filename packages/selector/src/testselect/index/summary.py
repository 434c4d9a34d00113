"""A one-line summary per test: what a reviewer reads in a ranked list and what the similarity query matches."""

from __future__ import annotations

from collections.abc import Sequence

_MAX_CALLS = 8
_MAX_DTYPES = 4
_MAX_LEN = 200


def summarize(
    name: str, docstring: str, comment: str, decorators: Sequence[str], params: dict, calls: Sequence[str]
) -> str:
    """The docstring's first line, else the comment above the test, else one built from name, decorators, calls."""
    for text in (docstring, comment):
        line = text.strip().splitlines()[0].strip() if text.strip() else ""
        if line:
            return line[:_MAX_LEN]
    parts = [name.removeprefix("test_").replace("_", " ").strip() or name]
    if "ops" in params:
        parts.append(f"over ops {params['ops']['expr']}")
    if "modules" in params:
        parts.append(f"over modules {params['modules']['expr']}")
    dtypes = params.get("dtypes", [])
    if dtypes:
        more = f" +{len(dtypes) - _MAX_DTYPES}" if len(dtypes) > _MAX_DTYPES else ""
        parts.append("dtypes " + ", ".join(dtypes[:_MAX_DTYPES]) + more)
    shown = [d for d in decorators if d not in ("ops", "modules", "dtypes")]
    if shown:
        parts.append("@" + " @".join(shown))
    torch_calls = [c for c in calls if c.startswith("torch.")] or list(calls)
    if torch_calls:
        parts.append("calls " + ", ".join(torch_calls[:_MAX_CALLS]))
    return "; ".join(parts)[:_MAX_LEN]
