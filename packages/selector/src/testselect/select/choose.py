"""The reasoner a command runs with, from its `--profile` and `--capabilities` options."""

from __future__ import annotations

import argparse
from pathlib import Path

from testselect.select.capabilities import load_capabilities
from testselect.select.profile import load_profile
from testselect.select.reasoner import RuleReasoner


def reasoner_options(parser: argparse.ArgumentParser) -> None:
    """The options `make_reasoner` reads."""
    parser.add_argument("--profile", required=True, help="the backend profile, e.g. configs/backend.yaml")
    parser.add_argument("--capabilities", metavar="CAPS", help="the device's capability export (YAML or JSON)")


def make_reasoner(args: argparse.Namespace) -> RuleReasoner:
    """The deterministic rule reasoner over the profile and, when given, the capability export."""
    profile = load_profile(Path(args.profile))
    caps = getattr(args, "capabilities", None)
    return RuleReasoner(profile, load_capabilities(Path(caps)) if caps else None)
