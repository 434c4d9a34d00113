"""What the core that ran is to the dispatched upstream commit: built from it, containing it, lacking it, or unknown.

A release or nightly wheel carries the commit it was built from (`torch.version.git_version`). Whether that build
holds the dispatched change is a question of git ancestry, answerable only where both commits are known: in the
suite's PyTorch checkout. The answer decides what a verdict may say: only a core built from the dispatched commit
lets a failure be laid at the dispatched change's door.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

BUILT_FROM = "built-from"
CONTAINS = "contains"
LACKS = "lacks"
UNKNOWN = "unknown"


def relation(core_git: str, commit: str, checkout: Path | None) -> tuple[str, str]:
    """(one of BUILT_FROM, CONTAINS, LACKS, UNKNOWN; a sentence saying so and why) for a core built from `core_git`
    against the dispatched `commit`, asking `checkout` (a git checkout holding both, or None) about ancestry."""
    short = commit[:12]
    if not core_git:
        return (
            UNKNOWN,
            f"the core records no source commit, so whether it contains the dispatched commit {short} is not known",
        )
    if core_git == commit:
        return BUILT_FROM, f"the core was built from the dispatched commit {short}"
    built = f"the core (git {core_git[:12]})"
    if checkout is None:
        return (
            UNKNOWN,
            f"{built} is not the dispatched commit {short}; with no upstream checkout, whether it holds it is unknown",
        )
    asked = _is_ancestor(checkout, commit, core_git)
    if asked is None:
        return UNKNOWN, (f"{built} is not the dispatched commit {short}, and whether it contains it is not known: "
                         f"the suite checkout does not hold both commits")  # fmt: skip
    if asked:
        return CONTAINS, f"{built} contains the dispatched commit {short} but was not built from it"
    return LACKS, f"{built} does not contain the dispatched commit {short}: the change under test did not run"


def _is_ancestor(checkout: Path, commit: str, descendant: str) -> bool | None:
    """git's answer (True, False), or None when either commit is missing or `checkout` is no git checkout."""
    for sha in (commit, descendant):
        known = subprocess.run(["git", "-C", str(checkout), "cat-file", "-e", f"{sha}^{{commit}}"],
                               capture_output=True, check=False)  # fmt: skip
        if known.returncode != 0:
            return None
    asked = subprocess.run(["git", "-C", str(checkout), "merge-base", "--is-ancestor", commit, descendant],
                           capture_output=True, check=False)  # fmt: skip
    return {0: True, 1: False}.get(asked.returncode)
