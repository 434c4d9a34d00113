"""The `crcr gate` and `crcr resolve` subcommands: argument parsing, one JSON object on stdout, GITHUB_OUTPUT.

Each catches its own expected errors and prints one `error:` line (exit 2); a decision to skip is exit 0. Neither
ever starts a process: payload strings go only into JSON, GITHUB_OUTPUT heredocs and HTTP paths built from
validated fields.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from crcr.actions_output import OutputError, Value, write_outputs
from crcr.gate.decide import Decision, decide
from crcr.gate.labels import Poll, poll_github
from crcr.gate.payload import PayloadError, PullRequest, parse, read
from crcr.gate.policy import PolicyError, load_policy
from crcr.github import GitHubError, from_environment
from crcr.resolve import KINDS, ResolveError, resolve

EXPECTED = (PayloadError, PolicyError, GitHubError, OutputError, ResolveError)


def _emit(values: Mapping[str, Value]) -> None:
    """GITHUB_OUTPUT first (a failure there is exit 2 before anything is said), then sorted JSON on stdout."""
    write_outputs(values)
    print(json.dumps(values, sort_keys=True))


def _guarded(command: Callable[[argparse.Namespace], None]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            command(args)
        except EXPECTED as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0

    return run


def payload_bytes(name: str) -> bytes:
    """The client_payload's bytes from file `name` (`-`: stdin), at most one byte over GitHub's cap."""
    if name == "-":
        return read(sys.stdin.buffer)
    try:
        with open(name, "rb") as handle:
            return read(handle)
    except OSError as exc:
        raise PayloadError(f"--payload: cannot read {name[:200]!r}: {exc.strerror or type(exc).__name__}") from None


def decision(raw: bytes, policy_path: Path, device: str | None = None, github_api: str | None = None) -> Decision:
    """What `crcr gate` decides on a client_payload (`raw`, as `payload_bytes` read it): one function, so
    `crcr ci --payload` runs exactly what the gate would have chosen."""
    policy = load_policy(policy_path, device)
    github = from_environment(github_api)
    dispatch = parse(raw)

    def poll(pr: PullRequest) -> Poll:
        return poll_github(github, dispatch.repository, pr.number, policy.merged_label, policy.poll_seconds,
                           policy.poll_interval)  # fmt: skip

    return decide(dispatch, policy, poll)


def _gate(args: argparse.Namespace) -> None:
    _emit(decision(payload_bytes(args.payload), Path(args.policy), args.device, args.github_api).as_dict())


def _resolve(args: argparse.Namespace) -> None:
    _emit(resolve(from_environment(args.github_api), args.repo, args.kind, getattr(args, "ref", "nightly")).as_dict())


def _github_api(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--github-api", metavar="URL", help="GitHub's REST API (default: $GITHUB_API_URL or "
                        "https://api.github.com); the token is $GITHUB_TOKEN")  # fmt: skip


def add_gate(sub: argparse._SubParsersAction) -> None:
    gate = sub.add_parser("gate", help="decide from a relay dispatch's client_payload whether to run, what and why")
    gate.add_argument("--payload", required=True, metavar="FILE", help="the client_payload JSON, or - for stdin")
    gate.add_argument("--policy", default="configs/crcr.yaml", help="the gate policy (default: configs/crcr.yaml)")
    gate.add_argument("--device", help="a device profile in configs/devices/ (default: the policy's device)")
    _github_api(gate)
    gate.set_defaults(run=_guarded(_gate))


def add_resolve(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("resolve", help="resolve the upstream SHA of nightly, a release branch or a ref")
    kinds = parser.add_subparsers(dest="kind", required=True, metavar="{" + ",".join(KINDS) + "}")
    for kind, argument, what in (("nightly", None, "the source commit of the nightly branch's HEAD"),
                                 ("release", "branch", "the HEAD of a release/<version> branch"),
                                 ("sha", "ref", "the full sha of a commit sha or ref")):  # fmt: skip
        one = kinds.add_parser(kind, help=what)
        if argument:
            one.add_argument("ref", metavar=argument.upper(), help=what)
        one.add_argument("--repo", default="pytorch/pytorch", help="owner/name (default: pytorch/pytorch)")
        _github_api(one)
    parser.set_defaults(run=_guarded(_resolve))
