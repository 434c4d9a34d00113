"""Checking a callback's bearer token the way the relay checks GitHub's: discovery, JWKS, RS256, aud, iss, exp.

The verifier knows only the issuer's URL; it reads the discovery document and the JWKS over HTTP (cached by
pyjwt), so it trusts a standalone issuer exactly as it trusts the one on its own port.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import jwt

from crcr import http
from crcr.relay.issuer import AUDIENCE, DISCOVERY_PATH

REQUIRED_CLAIMS = ["iss", "aud", "exp", "iat", "sub", "repository"]


class Unauthorized(Exception):
    """A missing or bad token: a 401."""


class Verifier:
    """Verify tokens from one issuer for one audience."""

    def __init__(self, issuer_url: str, audience: str = AUDIENCE, leeway: float = 5.0) -> None:
        self.issuer_url = issuer_url.rstrip("/")
        self.audience = audience
        self.leeway = leeway
        self._keys: jwt.PyJWKClient | None = None
        self._lock = threading.Lock()

    def _client(self) -> jwt.PyJWKClient:
        with self._lock:
            if self._keys is None:
                found = http.request("GET", f"{self.issuer_url}{DISCOVERY_PATH}", retry=http.Retry(attempts=3)).body
                if not isinstance(found, Mapping) or not isinstance(found.get("jwks_uri"), str):
                    raise Unauthorized("the issuer's discovery document has no jwks_uri")
                self._keys = jwt.PyJWKClient(found["jwks_uri"], cache_keys=True, lifespan=300)
            return self._keys

    def verify(self, authorization: str | None) -> dict[str, Any]:
        """The token's claims from an `Authorization: Bearer` header value, or Unauthorized saying why."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("missing bearer token")
        try:
            key = self._client().get_signing_key_from_jwt(token.strip())
            claims = jwt.decode(
                token.strip(),
                key.key,
                algorithms=["RS256"],
                audience=self.audience,
                issuer=self.issuer_url,
                leeway=self.leeway,
                options={"require": REQUIRED_CLAIMS},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthorized("invalid token: expired (its exp has passed)") from None
        except (jwt.PyJWTError, http.HTTPError) as exc:
            raise Unauthorized(f"invalid token: {type(exc).__name__}") from None
        if not isinstance(claims.get("repository"), str) or claims["repository"].count("/") != 1:
            raise Unauthorized("invalid token: the repository claim is not owner/repo")
        return claims
