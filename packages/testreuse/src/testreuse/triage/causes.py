"""The root cause of one failing case, from its results record: a category and the evidence for it.

Categories: `unsupported_op` (the first op and dtype the device refused, from its error), `numerics` (a comparison
failure with its greatest errors against the tolerance), `crash` (the signal), `timeout`, `harness` (set-up or
teardown errors, a worker that exited), `runtime_skip` (upstream skipped it, with the reason it gave),
`upstream_xfail` (upstream itself expects it to fail), `assertion` (a non-numeric assertion, by where it failed),
`exception` (any other error, by type, place and message). An error raised from another (torch's comparison
helpers wrap a device error in "Comparing ...") is classified by the one it was raised from. A reason names the
cause; it is never the assertion text or a bare "Skipped!".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

FAILING = frozenset({"failed", "error", "crashed", "timeout", "xfailed", "skipped"})
PASSING = frozenset({"passed", "xpassed"})

_UNSUPPORTED = (
    re.compile(r"(aten::[\w.]+) is not supported for dtype (\w+)"),
    re.compile(r"(aten::[\w.]+) is not implemented"),
    re.compile(r"Could not run '(aten::[\w.]+)' with arguments from the '(\w+)' backend"),
    re.compile(r"(aten::[\w.]+)"),
)
_COMPARISON = re.compile(r"^(Tensor-likes|Scalars|Booleans) are not (close|equal)!")
_SKIP_TYPES = frozenset({"Skipped", "SkipTest", "SkipException"})


@dataclass(frozen=True)
class Cause:
    """`key` groups cases that fail the same way (no per-case figures in it); `evidence` holds the figures."""

    category: str
    key: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def reason(self) -> str:
        """One line for a config's reason."""
        return _REASONS[self.category](self.evidence)


def classify(record: dict[str, Any]) -> Cause | None:
    """The cause of a failing case; None for one that passed or was skipped by its config."""
    outcome = record.get("outcome")
    if outcome not in FAILING or (outcome == "skipped" and record.get("mode") == "skip"):
        return None
    failure = record.get("failure") or {}
    if "signal" in record:
        return Cause("crash", f"crash {record['signal']}", {"signal": record["signal"]})
    if "timeout" in record or outcome == "timeout":
        seconds = record.get("timeout", "?")
        return Cause("timeout", "timeout", {"timeout_s": seconds})
    if "exit" in record:
        return Cause("harness", "harness exit", {"exit": record["exit"]})
    kind, message = failure.get("type", ""), failure.get("message", "")
    where = failure.get("test_at") or failure.get("raised_at") or record.get("nodeid", "")
    if kind in _SKIP_TYPES or outcome == "skipped":
        said = message if message.rstrip("!") not in ("", "Skipped", "skipped") else ""
        return Cause("runtime_skip", f"runtime_skip {said}", {"message": said})
    if failure.get("when") in ("setup", "teardown") or outcome == "error":
        return Cause("harness", f"harness {kind}", {"type": kind, "when": failure.get("when", "setup"), "at": where})
    if kind == "XFailed":
        return Cause("upstream_xfail", f"upstream_xfail {message}", {"message": message})
    inner = failure.get("cause") or {}
    for facts, within in ((inner, failure.get("raised_at")), (failure, None)):
        cause = _unsupported(str(facts.get("type", "")), str(facts.get("message", "")), within)
        if cause is not None:
            return cause
    if inner:
        kind, message = str(inner.get("type", "")), str(inner.get("message", ""))
        failure = {**failure, "raised_at": inner.get("raised_at") or failure.get("raised_at")}
    if _COMPARISON.match(message) or failure.get("mismatch"):
        evidence = {"kind": message.split("!")[0], **(failure.get("mismatch") or {})}
        return Cause("numerics", f"numerics {evidence['kind']}", evidence)
    if kind == "AssertionError":
        return Cause("assertion", f"assertion {where}", {"at": where})
    return Cause(
        "exception",
        f"exception {kind}: {message}",
        {"type": kind or "unknown", "at": failure.get("raised_at") or where, "message": message[:160]},
    )


def _unsupported(kind: str, message: str, within: str | None) -> Cause | None:
    """The op (and dtype) a device refused, from its error; `within` is where an outer error wrapped it."""
    if kind != "NotImplementedError" and "not supported for dtype" not in message:
        return None
    for pattern in _UNSUPPORTED:
        found = pattern.search(message)
        if found:
            op = found.group(1)
            dtype = found.group(2) if pattern.groups > 1 and "dtype" in pattern.pattern else None
            evidence = {"op": op, **({"dtype": dtype} if dtype else {}), **({"within": within} if within else {})}
            return Cause("unsupported_op", f"unsupported {op} {dtype or ''}".strip(), evidence)
    return None


def _lacks(e: dict[str, Any]) -> str:
    text = f"device lacks {e['op']}" + (f" for {e['dtype']}" if "dtype" in e else "")
    return text + (f" (needed by {e['within'].rsplit(':', 1)[0]})" if "within" in e else "")


def _g(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) and math.isfinite(value) else str(value)


def _numerics(e: dict[str, Any]) -> str:
    kind = str(e.get("kind", "")).lower()
    parts = ["results not equal" if "not equal" in kind else "results not close"]
    if "max_abs" in e:
        parts.append(f"max abs error {_g(e['max_abs'])} (allowed {_g(e.get('abs_allowed', 0.0))})")
    if "max_rel" in e:
        parts.append(f"max rel error {_g(e['max_rel'])} (allowed {_g(e.get('rel_allowed', 0.0))})")
    if "mismatched" in e:
        parts.append(f"{e['mismatched']} of {e['elements']} elements")
    return ", ".join(parts)


_REASONS = {
    "unsupported_op": _lacks,
    "numerics": _numerics,
    "crash": lambda e: f"crash: the test process was killed by {e['signal']}",
    "timeout": lambda e: f"timeout: killed after {e['timeout_s']} s",
    "harness": lambda e: (
        f"harness: the test process exited with status {e['exit']} before reporting"
        if "exit" in e
        else f"harness: {e['type'] or 'error'} during {e['when']} at {e['at']}"
    ),
    "runtime_skip": lambda e: (
        f"upstream skips it at runtime: {e['message']}" if e["message"] else "upstream skips it, giving no reason"
    ),
    "upstream_xfail": lambda e: "upstream expects it to fail" + (f": {e['message']}" if e["message"] else ""),
    "assertion": lambda e: f"a non-numeric assertion fails at {e['at']}",
    "exception": lambda e: f"{e['type']} at {e['at']}: {e['message']}",
}
