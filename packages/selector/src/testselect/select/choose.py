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

KEY_ENV = "OPENAI_API_KEY"
LLM_OPTIONS = ("llm_endpoint", "llm_model", "llm_key_env", "llm_cache", "llm_batch", "llm_timeout", "llm_retries")


def reasoner_options(parser: argparse.ArgumentParser) -> None:
    """The options `make_reasoner` reads; the LLM ones default to None so a stray one is an error, not ignored."""
    parser.add_argument("--profile", required=True, help="the backend profile, e.g. configs/backend.yaml")
    parser.add_argument("--capabilities", metavar="CAPS", help="the device's capability export (YAML or JSON)")
    parser.add_argument(
        "--reasoner", choices=("rules", "llm"), default="rules", help="who decides buckets (default: rules)"
    )
    llm = parser.add_argument_group("LLM reasoner (--reasoner llm): proposals validated against the evidence")
    llm.add_argument("--llm-endpoint", metavar="URL", help="an OpenAI-compatible API base, e.g. http://host:8000/v1")
    llm.add_argument("--llm-model", metavar="NAME", help="the model name the endpoint serves")
    llm.add_argument("--llm-key-env", metavar="VAR", help=f"the environment variable holding the key ({KEY_ENV})")
    llm.add_argument("--llm-cache", metavar="DIR", help="replies by request hash (default: STORE.llm-cache)")
    llm.add_argument("--llm-batch", type=int, metavar="N", help="tests per request (default: 8)")
    llm.add_argument("--llm-timeout", type=float, metavar="S", help="seconds per request (default: 120)")
    llm.add_argument("--llm-retries", type=int, metavar="N", help="retries on 429, 5xx or no answer (default: 3)")
    llm.add_argument(
        "--llm-fallback",
        choices=("error", "rules"),
        default="error",
        help="when the endpoint fails after retries: exit 2 (error, default) or let the rules decide (rules)",
    )


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
    key_env = args.llm_key_env or KEY_ENV
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key_env):
        raise CliError(f"--llm-key-env {key_env}: not an environment variable name")
    timeout = 120.0 if args.llm_timeout is None else args.llm_timeout
    retries = 3 if args.llm_retries is None else args.llm_retries
    if timeout <= 0:
        raise CliError(f"--llm-timeout {timeout:g}: must be more than 0")
    if retries < 0:
        raise CliError(f"--llm-retries {retries}: must be 0 or more")
    return Endpoint(args.llm_endpoint, args.llm_model, os.environ.get(key_env) or None, timeout, retries)


def make_reasoner(args: argparse.Namespace) -> RuleReasoner | LlmReasoner:
    """The deterministic rule reasoner, or with `--reasoner llm` the LLM one over the same profile and export."""
    reasoner = getattr(args, "reasoner", "rules")
    given = [f"--{name.replace('_', '-')}" for name in LLM_OPTIONS if getattr(args, name, None) is not None]
    if reasoner == "rules" and (given or getattr(args, "llm_fallback", "error") != "error"):
        raise CliError(f"{(given or ['--llm-fallback'])[0]} needs --reasoner llm")
    endpoint = _endpoint(args) if reasoner == "llm" else None
    batch = 8 if getattr(args, "llm_batch", None) is None else args.llm_batch
    if batch < 1:
        raise CliError(f"--llm-batch {batch}: must be at least 1")
    profile = load_profile(Path(args.profile))
    caps = getattr(args, "capabilities", None)
    capabilities = load_capabilities(Path(caps)) if caps else None
    if endpoint is None:
        return RuleReasoner(profile, capabilities)
    cache = Path(args.llm_cache or f"{args.store}.llm-cache")
    return LlmReasoner(profile, capabilities, endpoint, cache, batch, args.llm_fallback == "rules", _to_stderr)
