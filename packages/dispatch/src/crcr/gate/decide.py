"""The gate's decision: a pure function of one dispatch, the policy and what polling the PR's labels saw."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from fnmatch import fnmatchcase
from typing import Any

from crcr.gate.labels import Poll
from crcr.gate.payload import ZERO_SHA, Dispatch, PullRequest, Push
from crcr.gate.policy import Policy

_PR_NUMBER = re.compile(r"[1-9][0-9]{0,9}")


@dataclass(frozen=True)
class Decision:
    """Whether to run, what (`combination` at upstream `sha`) and why; the rest says which event it was."""

    run: bool
    reason: str
    sha: str | None  # the upstream commit the event names, also when skipped; None for a deletion
    combination: str | None  # None when skipped
    event: str
    delivery_id: str
    repository: str
    device: str
    action: str | None = None
    pr: int | None = None
    base_ref: str | None = None
    ref: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide(dispatch: Dispatch, policy: Policy, poll: Callable[[PullRequest], Poll]) -> Decision:
    """Decide on `dispatch`; `poll(pr)` is called only for a closed PR that shows no sign of having landed."""
    facts = {"event": dispatch.event_type, "delivery_id": dispatch.delivery_id, "repository": dispatch.repository}
    facts["device"] = policy.device
    if isinstance(dispatch.event, Push):
        return _push(dispatch.event, policy, facts)
    return _pull_request(dispatch.event, policy, poll, facts)


def _gated(branch: str, policy: Policy) -> bool:
    return any(fnmatchcase(branch, pattern) for pattern in policy.branches)


def _pull_request(pr: PullRequest, policy: Policy, poll: Callable[[PullRequest], Poll], facts: dict) -> Decision:
    facts |= {"action": pr.action, "pr": pr.number, "base_ref": pr.base_ref}
    name, branches = f"pull request #{pr.number}", ", ".join(policy.branches)

    def run(reason: str, sha: str) -> Decision:
        return Decision(True, reason, sha, policy.combination, **facts)

    def skip(reason: str, sha: str) -> Decision:
        return Decision(False, reason, sha, None, **facts)

    if pr.action == "closed":
        sha = pr.merge_commit_sha or pr.head_sha
        if not _gated(pr.base_ref, policy):
            return skip(f"{name} was closed on {pr.base_ref}, not a gated branch ({branches})", sha)
        landed = f"{name} landed on {pr.base_ref}"
        if pr.merged:
            return run(f"{landed} (merged)", sha)
        if policy.merged_label in pr.labels:
            return run(f"{landed} (label {policy.merged_label})", sha)
        seen = poll(pr)
        if seen.found:
            return run(f"{landed} (label {policy.merged_label} appeared after {seen.seconds:.1f} s, "
                       f"{seen.polls} poll(s))", sha)  # fmt: skip
        why = f"{name} was closed unmerged without the label {policy.merged_label}"
        if policy.poll_seconds > 0:
            why += f" after {seen.seconds:.1f} s of polling ({seen.polls} poll(s))"
        if seen.error:
            why += f"; last poll failed: {seen.error}"
        return (run if policy.fallback == "run" else skip)(f"{why}; fallback: {policy.fallback}", sha)
    if pr.action not in policy.actions:
        return skip(f"{name}: action {pr.action} is not gated (runs: {', '.join(policy.actions)}; closed if landed)",
                    pr.head_sha)  # fmt: skip
    if not _gated(pr.base_ref, policy):
        return skip(f"{name} targets {pr.base_ref}, not a gated branch ({branches})", pr.head_sha)
    if policy.label not in pr.labels:
        return skip(f"{name} ({pr.action}) does not carry the label {policy.label}", pr.head_sha)
    return run(f"{name} ({pr.action}) into {pr.base_ref} carries the label {policy.label}", pr.head_sha)


def _push(push: Push, policy: Policy, facts: dict) -> Decision:
    facts["ref"] = push.ref
    if push.deleted or push.after == ZERO_SHA:
        return Decision(False, f"push deletes {push.ref}", None, None, **facts)
    if push.ref.startswith("refs/tags/"):
        tag = push.ref.removeprefix("refs/tags/")
        for prefix in policy.tag_prefixes:
            number = tag.removeprefix(prefix)
            if tag.startswith(prefix) and _PR_NUMBER.fullmatch(number):
                return Decision(True, f"ciflow tag {tag} (pull request #{number})", push.after, policy.combination,
                                pr=int(number), **facts)  # fmt: skip
        prefixes = ", ".join(f"{prefix}<PR number>" for prefix in policy.tag_prefixes) or "none"
        return Decision(False, f"tag {tag} is not a gated ciflow tag ({prefixes})", push.after, None, **facts)
    branch = push.ref.removeprefix("refs/heads/")
    if _gated(branch, policy):
        return Decision(True, f"push to {branch}", push.after, policy.combination, **facts)
    return Decision(False, f"push to {branch}, not a gated branch ({', '.join(policy.branches)})", push.after, None,
                    **facts)  # fmt: skip
