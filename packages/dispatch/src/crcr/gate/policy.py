"""`configs/crcr.yaml`: which dispatches the gate runs, as data, so a repository changes its policy without code.

Read with crcr's typed config helpers (`crcr.configfile`): errors are `file:line: field: message`. `{device}` in
the label and the tag prefixes is the policy's device, or `--device`'s; either must name a profile in
`configs/devices/` beside the policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from crcr.ci.ciconfig import load_profile
from crcr.configfile import ConfigError, Fields, located, read_mapping

FALLBACKS = ("skip", "run")


class PolicyError(Exception):
    """A policy that cannot be used: one line, `file:line: field: message`."""


@dataclass(frozen=True)
class Policy:
    """The gate's rules, with `{device}` already filled in."""

    device: str
    combination: str  # what `crcr ci --only` runs for a dispatch that passes
    branches: tuple[str, ...]  # glob patterns (fnmatch) of base branches and pushed branches
    actions: tuple[str, ...]  # pull_request actions that run an open PR carrying `label`
    label: str  # the L3 label, ciflow/crcr/<device>
    merged_label: str  # the label PyTorch's merge bot adds to a PR it landed
    poll_seconds: float  # how long to wait for `merged_label` on a closed, unmerged PR; 0: do not poll
    poll_interval: float
    fallback: str  # "skip" or "run": what a closed PR gets when the label never came
    tag_prefixes: tuple[str, ...]  # pushed tags refs/tags/<prefix><PR number> that run
    source: Path


_TOP = {"device", "combination", "branches", "pull_request", "landed", "push"}


def load_policy(path: Path, device: str | None = None) -> Policy:
    """Read and check the policy at `path`; `device` overrides the policy's own."""
    try:
        return located(path, lambda: _load(path, device))
    except ConfigError as exc:
        raise PolicyError(str(exc)) from None


def _load(path: Path, device: str | None) -> Policy:
    top = Fields(path, read_mapping(path), _TOP)
    pull = Fields(path, top.mapping("pull_request"), {"actions", "label"}, "pull_request.")
    landed = Fields(path, top.mapping("landed"), {"label", "poll", "fallback"}, "landed.")
    poll = Fields(path, landed.mapping("poll"), {"seconds", "interval"}, "landed.poll.")
    push = Fields(path, top.mapping("push"), {"tag_prefixes"}, "push.")
    device = device or top.text("device")
    load_profile(path.parent, device)
    fallback = landed.text("fallback", "skip")
    if fallback not in FALLBACKS:
        raise landed.fail("fallback", "expected skip or run")
    return Policy(
        device=device,
        combination=top.text("combination", "primary"),
        branches=top.texts("branches", ("main", "release/*")),
        actions=pull.texts("actions", ("opened", "reopened", "synchronize")),
        label=pull.text("label", "ciflow/crcr/{device}").replace("{device}", device),
        merged_label=landed.text("label", "Merged"),
        poll_seconds=float(poll.number("seconds", 60.0, minimum=0)),
        poll_interval=float(poll.number("interval", 5.0, minimum=0.01)),
        fallback=fallback,
        tag_prefixes=tuple(
            p.replace("{device}", device) for p in push.texts("tag_prefixes", ("ciflow/crcr/{device}/",))
        ),
        source=path,
    )
