"""Which environment variables are credentials, so no process that runs upstream test code is handed one.

A job that reports to the relay holds what mints its OIDC token (`ACTIONS_ID_TOKEN_REQUEST_URL`/`_TOKEN`, which
also authorise the runner's artifact and cache services) and often a GitHub token; the upstream test files it runs
come from a PR's head. Anything those files can read they can use as this repository.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping

#: Shell-style patterns of credential names: the Actions runtime and OIDC request pair, the relay token, and any
#: name that says token, secret, password or key.
PATTERNS = (
    "ACTIONS_*",
    "CRCR_*",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
    "*API_KEY*",
    "*_KEY",
)


def is_credential(name: str) -> bool:
    """Whether `name` looks like a credential (case-insensitive)."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in PATTERNS)


#: What mints or is the relay's token: the runner's OIDC request pair and runtime token, and crcr's own variables.
RELAY = ("ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "ACTIONS_RUNTIME_TOKEN", "CRCR_*")


def without_relay_credentials(env: Mapping[str, str], names: Iterable[str] = ()) -> dict[str, str]:
    """`env` less every variable that is or mints the relay's token, and the given names (a `--token-env`)."""
    dropped = (*RELAY, *names)
    return {k: v for k, v in env.items() if not any(fnmatch.fnmatchcase(k, pattern) for pattern in dropped)}
