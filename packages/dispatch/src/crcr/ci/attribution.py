"""Attribution: which moved candidate a new failure follows.

The public critique of latest-of-everything CI is that one run cannot tell two suspects apart: when the backend and
torch both moved since the last green run, a new failure could be either's. The answer is a probe per suspect: rerun
only the new failures with that one candidate pinned back to its last-green version and the others current. A
failure that passes when exactly one candidate is pinned back follows that candidate; passing under several or none
leaves it unknown, and the reason says so. The core-version matrix gives a second, free signal: same backend, same
suite, two torch versions; a failure on the newer torch only is upstream's.
"""

from __future__ import annotations

import dataclasses
import re

from crcr.ci.classify import KINDS, moved_since
from crcr.ci.model import Candidate, Combination, CombinationResult

PROBE_SEPARATOR = "~"
_PROBE = re.compile(r"~(backend|core|suite)@")


def plan_attribution(current: Combination, last_green: Combination, failing: list[str]) -> list[Combination]:
    """One probe combination per moved candidate, that candidate pinned back to `last_green`'s, when more than one
    candidate moved and something fails; [] when one or none moved (then `classify` already knows whom to blame)."""
    moved = moved_since(current, last_green)
    if not failing or len(moved) < 2:
        return []
    probes = []
    for kind in KINDS:
        if kind not in moved:
            continue
        old: Candidate = getattr(last_green, kind)
        new: Candidate = getattr(current, kind)
        label = old.name if old.name != new.name else f"{old.name}:{old.sha[:12]}"
        name = f"{current.name}{PROBE_SEPARATOR}{kind}@{label}"
        probes.append(dataclasses.replace(current, name=name, **{kind: old}))
    return probes


def pinned_kind(probe: Combination | str) -> str:
    """The candidate kind a probe pins back, read from its name ("" if it is not a probe)."""
    name = probe if isinstance(probe, str) else probe.name
    found = _PROBE.search(name)
    return found.group(1) if found else ""


def attribute(failing: list[str], probes: dict[str, set[str]], pinned: dict[str, str]) -> dict[str, str]:
    """nodeid -> the candidate kind it follows, or "" when it passes under several probes or none."""
    return {nodeid: follows for nodeid, (follows, _) in explain(failing, probes, pinned).items()}


def explain(failing: list[str], probes: dict[str, set[str]], pinned: dict[str, str]) -> dict[str, tuple[str, str]]:
    """nodeid -> (kind or "", a sentence saying which probes it passed under)."""
    found: dict[str, tuple[str, str]] = {}
    for nodeid in failing:
        passing = sorted({pinned[p] for p, passed in probes.items() if p in pinned and nodeid in passed})
        if len(passing) == 1:
            found[nodeid] = (passing[0], f"passes with only the {passing[0]} pinned back to its last-green version")
        elif passing:
            found[nodeid] = ("", f"passes with any of {', '.join(passing)} pinned back: not one suspect")
        else:
            tried = ", ".join(sorted({pinned[p] for p in probes if p in pinned})) or "no probe ran"
            found[nodeid] = ("", f"fails with each moved candidate pinned back ({tried}): several at once, or new")
    return found


def core_matrix_upstream(results: list[CombinationResult]) -> dict[str, set[str]]:
    """Per combination, its failures that are absent (the test ran and passed) with an older torch, for the same
    backend, suite and variant: upstream's, with no probe needed. A test skipped or not run on the older torch is
    no evidence, and neither is another variant's run (a compiled failure can pass eagerly on any torch)."""
    groups: dict[tuple[str, str, str], list[CombinationResult]] = {}
    for result in results:
        if result.tests:
            combo = result.combination
            groups.setdefault((combo.backend.sha, combo.suite.sha, combo.variant), []).append(result)
    upstream: dict[str, set[str]] = {}
    for group in groups.values():
        ordered = sorted(group, key=lambda r: version_key(r.combination.core.version))
        for i, older in enumerate(ordered):
            passing_old = {t.nodeid for t in older.tests if t.outcome == "passed"}
            for newer in ordered[i + 1 :]:
                if version_key(newer.combination.core.version) == version_key(older.combination.core.version):
                    continue
                found = {t.nodeid for t in newer.tests if t.failing and t.nodeid in passing_old}
                if found:
                    upstream.setdefault(newer.combination.name, set()).update(found)
    return upstream


def version_key(version: str) -> tuple[int, ...]:
    """ "2.14.1+cu128" -> (2, 14, 1): enough order for torch releases (the local part is a build, not a version)."""
    numbers = re.findall(r"\d+", version.split("+", 1)[0])
    return tuple(int(n) for n in numbers)
