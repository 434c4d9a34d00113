"""A local OIDC issuer shaped like GitHub Actions', so callbacks are signed and checked for real, offline.

It holds one RSA key, publishes it as a JWKS behind an OpenID discovery document, mints RS256 tokens with the
claims a GitHub Actions job's token carries, and answers the runner's token endpoint (the URL in
`ACTIONS_ID_TOKEN_REQUEST_URL`): `GET <url>&audience=X` with `Authorization: Bearer <ACTIONS_ID_TOKEN_REQUEST_TOKEN>`
returns `{"value": "<jwt>"}`, which is what `@actions/core`'s `getIDToken` reads. Tokens live `token_lifetime`
seconds (300 by default); a short lifetime lets a test see a job outlive its token.

Its routes are served by the relay's server (same port) or on their own (`crcr.relay.server.running_issuer`).
"""

from __future__ import annotations

import hmac
import json
import secrets
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from crcr.relay.web import Reply, Request, json_reply

AUDIENCE = "pytorch-cross-repo-ci-relay"
DISCOVERY_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/.well-known/jwks"
TOKEN_PATH = "/_actions/id-token"
TOKEN_LIFETIME = 300


def new_key() -> rsa.RSAPrivateKey:
    """A fresh 2048-bit RSA key: the issuer's own, or a stranger's for tests of a signature the JWKS does not hold."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Issuer:
    """One signing key, its JWKS, and tokens minted with GitHub-Actions-shaped claims.

    `url` is set once the server hosting the routes knows its address (`bind`); until then nothing can be minted.
    """

    def __init__(
        self,
        repository: str = "tributary/tributary",
        key: rsa.RSAPrivateKey | None = None,
        token_lifetime: int = TOKEN_LIFETIME,
    ) -> None:
        if isinstance(token_lifetime, bool) or not isinstance(token_lifetime, int) or token_lifetime < 1:
            raise ValueError(f"the token lifetime must be a positive whole number of seconds: {token_lifetime!r}")
        self.token_lifetime = token_lifetime
        self.key = key or new_key()
        self.kid = secrets.token_hex(8)
        self.repository = repository
        self.request_token = secrets.token_urlsafe(24)
        self.url = ""

    def bind(self, base_url: str) -> None:
        """Take the issuer URL: the base URL of the server that serves the discovery document."""
        self.url = base_url.rstrip("/")

    @property
    def token_request_url(self) -> str:
        """What `ACTIONS_ID_TOKEN_REQUEST_URL` holds on a runner: already carries a query, so clients append `&`."""
        return f"{self.url}{TOKEN_PATH}?api-version=2.0"

    def jwks(self) -> dict[str, Any]:
        """The public half of the key as a JWK Set, with the key id tokens carry in their header."""
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def discovery(self) -> dict[str, Any]:
        """The OpenID configuration a verifier reads to find the JWKS."""
        return {
            "issuer": self.url,
            "jwks_uri": f"{self.url}{JWKS_PATH}",
            "subject_types_supported": ["public", "pairwise"],
            "response_types_supported": ["id_token"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "claims_supported": ["sub", "aud", "exp", "iat", "iss", "repository", "repository_owner", "run_id"],
        }

    def claims(
        self,
        *,
        repository: str | None = None,
        audience: str = AUDIENCE,
        expires_in: int | None = None,
        ref: str = "refs/heads/main",
        workflow: str = "downstream",
        run_id: str = "1",
        run_attempt: str = "1",
        now: float | None = None,
    ) -> dict[str, Any]:
        """The claims GitHub puts in a job's token; `expires_in` (default: the token lifetime) may be negative to mint
        an already-expired one."""
        repo = repository or self.repository
        issued = int(time.time() if now is None else now)
        return {
            "iss": self.url,
            "aud": audience,
            "sub": f"repo:{repo}:ref:{ref}",
            "repository": repo,
            "repository_owner": repo.split("/", 1)[0],
            "ref": ref,
            "workflow": workflow,
            "job_workflow_ref": f"{repo}/.github/workflows/{workflow}.yml@{ref}",
            "run_id": run_id,
            "run_attempt": run_attempt,
            "jti": secrets.token_hex(8),
            "iat": issued,
            "nbf": issued - 5,
            "exp": issued + (self.token_lifetime if expires_in is None else expires_in),
        }

    def mint(self, *, key: rsa.RSAPrivateKey | None = None, issuer: str | None = None, **claims: Any) -> str:
        """An RS256 token; `key` signs with another key (same kid), `issuer` overrides `iss`; the rest: claims()."""
        if not self.url:
            raise RuntimeError("the issuer has no URL yet: bind() it to the server that serves it")
        body = self.claims(**claims)
        if issuer is not None:
            body["iss"] = issuer
        return jwt.encode(body, key or self.key, algorithm="RS256", headers={"kid": self.kid})

    def answer(self, request: Request) -> Reply | None:
        """Serve the issuer's routes (discovery, JWKS, runner token endpoint); None for a path that is not ours."""
        if request.method != "GET":
            return None
        if request.path == DISCOVERY_PATH:
            return json_reply(200, self.discovery())
        if request.path == JWKS_PATH:
            return json_reply(200, self.jwks())
        if request.path == TOKEN_PATH:
            return self._runner_token(request.headers, request.query)
        return None

    def _runner_token(self, headers: Mapping[str, str], query: Mapping[str, list[str]]) -> Reply:
        given = headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {self.request_token}".encode()):
            return json_reply(401, {"message": "bad or missing request token"})
        audience = (query.get("audience") or [AUDIENCE])[-1]
        return json_reply(200, {"count": 1, "value": self.mint(audience=audience)})


def with_audience(token_request_url: str, audience: str) -> str:
    """The runner endpoint's URL for one audience, as `getIDToken` builds it (`&audience=`, or `?` if no query)."""
    joiner = "&" if urllib.parse.urlsplit(token_request_url).query else "?"
    return f"{token_request_url}{joiner}audience={urllib.parse.quote(audience, safe='')}"
