"""The bearer token for the relay: a GitHub OIDC token with audience `pytorch-cross-repo-ci-relay`.

In GitHub Actions (a job with `id-token: write`) the runner exposes `ACTIONS_ID_TOKEN_REQUEST_URL` and
`ACTIONS_ID_TOKEN_REQUEST_TOKEN`; the token is minted by GETting that URL with the audience added and taking `value`,
through `crcr.http` (retried like any other request). Elsewhere it comes from a named environment variable or
`CRCR_TOKEN`. No token is ever printed or put in an error message.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from crcr import http

AUDIENCE = "pytorch-cross-repo-ci-relay"
REQUEST_URL = "ACTIONS_ID_TOKEN_REQUEST_URL"
REQUEST_TOKEN = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
DEFAULT_ENV = "CRCR_TOKEN"
RETRY = http.Retry()


class TokenError(Exception):
    """No token could be had; the message names where it was looked for, never a token."""


def request_url(url: str, audience: str = AUDIENCE) -> str:
    """The runner's token URL with `audience` set, whether or not the URL already has a query."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "audience"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("audience", audience)])))


def mint(env: Mapping[str, str], audience: str = AUDIENCE, retry: http.Retry = RETRY) -> str:
    """A fresh OIDC token from the Actions runner."""
    url, bearer = env.get(REQUEST_URL, ""), env.get(REQUEST_TOKEN, "")
    if not url or not bearer:
        raise TokenError(f"{REQUEST_URL} and {REQUEST_TOKEN} are not both set (does the job have id-token: write?)")
    try:
        answer = http.request("GET", request_url(url, audience), token=bearer, retry=retry)
    except http.HTTPError as exc:
        raise TokenError(f"minting the OIDC token failed: {exc}") from None
    value = answer.body.get("value") if isinstance(answer.body, dict) else None
    if not isinstance(value, str) or not value:
        raise TokenError("the OIDC token endpoint answered without a `value`")
    return value


def token(env: Mapping[str, str], name: str = "", retry: http.Retry = RETRY) -> str:
    """The relay token: `$name` when given, else `$CRCR_TOKEN`, else one minted from the Actions runner."""
    if name:
        if not env.get(name):
            raise TokenError(f"--token-env {name}: that environment variable is not set or empty")
        return env[name]
    if env.get(DEFAULT_ENV):
        return env[DEFAULT_ENV]
    if env.get(REQUEST_URL):
        return mint(env, retry=retry)
    raise TokenError(f"no token: set {DEFAULT_ENV}, pass --token-env NAME, or run in a job with id-token: write")
