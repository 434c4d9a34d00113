"""The reasoner a command runs with, from its `--profile`, `--capabilities` and `--reasoner` options."""

from __future__ import annotations

import argparse
import os
import re
import sys
import urllib.parse
from pathlib import Path

from testselect.command import CliError
from testselect.select.capabilities import load_capabilities
from testselect.select.llm.client import Endpoint
from testselect.select.llm.reasoner import LlmReasoner
from testselect.select.profile import load_profile
from testselect.select.reasoner import RuleReasoner

# The LLM options' defaults: one that differs from its default without `--reasoner llm` is an error, not ignored.
LLM_DEFAULTS = {
    "llm_endpoint": None,
    "llm_model": None,
    "llm_key_env": "OPENAI_API_KEY",
    "llm_cache": None,
    "llm_batch": 8,
    "llm_timeout": 120.0,
    "llm_retries": 3,
    "llm_fallback": "error",
}


def reasoner_options(parser: argparse.ArgumentParser) -> None:
    """The options `make_reasoner` reads."""
    parser.add_argument("--profile", required=True, help="the backend profile, e.g. configs/backend.yaml")
    parser.add_argument("--capabilities", metavar="CAPS", help="the device's capability export (YAML or JSON)")
    parser.add_argument(
        "--reasoner", choices=("rules", "llm"), default="rules", help="who decides buckets (default: rules)"
    )
    llm = parser.add_argument_group("LLM reasoner (--reasoner llm): proposals validated against the evidence")
    llm.add_argument("--llm-endpoint", metavar="URL", help="an OpenAI-compatible API base, e.g. http://host:8000/v1")
    llm.add_argument("--llm-model", metavar="NAME", help="the model name the endpoint serves")
    llm.add_argument("--llm-key-env", metavar="VAR", help="the environment variable holding the key (%(default)s)")
    llm.add_argument("--llm-cache", metavar="DIR", help="replies by request hash (default: STORE.llm-cache)")
    llm.add_argument("--llm-batch", type=int, metavar="N", help="tests per request (default: %(default)s)")
    llm.add_argument("--llm-timeout", type=float, metavar="S", help="seconds per request (default: %(default)s)")
    llm.add_argument("--llm-retries", type=int, metavar="N", help="on 429, 5xx or no answer (default: %(default)s)")
    llm.add_argument(
        "--llm-fallback",
        choices=("error", "rules"),
        help="when the endpoint fails after retries: exit 2 (error, default) or let the rules decide (rules)",
    )
    parser.set_defaults(**LLM_DEFAULTS)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _endpoint(args: argparse.Namespace) -> Endpoint:
    """The endpoint from the options, each checked; the key only from the environment."""
    for option in ("llm_endpoint", "llm_model"):
        if getattr(args, option) is None:
            raise CliError(f"--reasoner llm needs --{option.replace('_', '-')}")
    url = urllib.parse.urlsplit(args.llm_endpoint)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise CliError(f"--llm-endpoint {args.llm_endpoint}: not an http(s) URL with a host")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", args.llm_key_env):
        raise CliError(f"--llm-key-env {args.llm_key_env}: not an environment variable name")
    if args.llm_timeout <= 0:
        raise CliError(f"--llm-timeout {args.llm_timeout:g}: must be more than 0")
    if args.llm_retries < 0:
        raise CliError(f"--llm-retries {args.llm_retries}: must be 0 or more")
    if args.llm_batch < 1:
        raise CliError(f"--llm-batch {args.llm_batch}: must be at least 1")
    key = os.environ.get(args.llm_key_env) or None
    return Endpoint(args.llm_endpoint, args.llm_model, key, args.llm_timeout, args.llm_retries)


def make_reasoner(args: argparse.Namespace) -> RuleReasoner | LlmReasoner:
    """The deterministic rule reasoner, or with `--reasoner llm` the LLM one over the same profile and export."""
    if args.reasoner == "rules":
        stray = next((name for name, default in LLM_DEFAULTS.items() if getattr(args, name) != default), None)
        if stray is not None:
            raise CliError(f"--{stray.replace('_', '-')} needs --reasoner llm")
    endpoint = _endpoint(args) if args.reasoner == "llm" else None
    profile = load_profile(Path(args.profile))
    capabilities = load_capabilities(Path(args.capabilities)) if args.capabilities else None
    if endpoint is None:
        return RuleReasoner(profile, capabilities)
    cache = Path(args.llm_cache or f"{args.store}.llm-cache")
    fallback = args.llm_fallback == "rules"
    return LlmReasoner(profile, capabilities, endpoint, cache, args.llm_batch, fallback, _to_stderr)
