"""`configs/crcr.yaml`: which dispatches the gate runs, as data, so a repository changes its policy without code.

Read with the CI config's typed field helpers (`crcr.ci.ciconfig`); their `file: field: message` errors gain the line
of the deepest node that exists (`file:line: field: message`). `{device}` in the label and the tag prefixes is the
policy's device, or `--device`'s; either must name a profile in `configs/devices/` beside the policy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from crcr.ci.ciconfig import CIConfigError, _Fields, _read, load_profile

FALLBACKS = ("skip", "run")
_FIELD = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


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
        return _load(path, device)
    except CIConfigError as exc:
        raise PolicyError(_with_line(path, str(exc))) from None


def _load(path: Path, device: str | None) -> Policy:
    top = _Fields(path, _read(path), _TOP)
    pull = _Fields(path, top.mapping("pull_request"), {"actions", "label"}, "pull_request.")
    landed = _Fields(path, top.mapping("landed"), {"label", "poll", "fallback"}, "landed.")
    poll = _Fields(path, landed.mapping("poll"), {"seconds", "interval"}, "landed.poll.")
    push = _Fields(path, top.mapping("push"), {"tag_prefixes"}, "push.")
    device = device or top.text("device")
    load_profile(path.parent, device)
    fallback = landed.text("fallback", "skip")
    if fallback not in FALLBACKS:
        raise CIConfigError(f"{path}: landed.fallback: expected skip or run")
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


def _with_line(path: Path, message: str) -> str:
    """`file: a.b[1].c: why` -> `file:LINE: a.b[1].c: why`, LINE that of the deepest node of the path that exists."""
    prefix = f"{path}: "
    if not message.startswith(prefix):
        return message  # already located (a YAML syntax error) or about another file (a device profile)
    field = message[len(prefix) :].partition(": ")[0]
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return message
    line = node.start_mark.line + 1 if node is not None else 1
    for key, index in _FIELD.findall(field):
        if isinstance(node, yaml.MappingNode) and key:
            found = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key]
            if not found:
                break
            line, node = found[-1][0].start_mark.line + 1, found[-1][1]
        elif isinstance(node, yaml.SequenceNode) and index and int(index) < len(node.value):
            node = node.value[int(index)]
            line = node.start_mark.line + 1
        else:
            break
    return f"{path}:{line}: {message[len(prefix) :]}"
