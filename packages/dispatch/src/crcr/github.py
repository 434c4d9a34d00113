"""The few GitHub REST calls crcr makes (labels of a PR, a commit, a branch), all through `crcr.http.request`.

The API base comes from `--github-api` or `GITHUB_API_URL` (GitHub Enterprise and the tests' local server), the token
from `GITHUB_TOKEN`; the token goes only into the Authorization header and is never part of a message.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from crcr.http import HTTPError, Retry, request

DEFAULT_API = "https://api.github.com"
REPO = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")


class GitHubError(Exception):
    """Bad client settings (an API URL that is not http(s), a repository that is not owner/name)."""


@dataclass(frozen=True)
class GitHub:
    """One API base and token; `retry` is how patiently each call retries 429, 5xx and network errors."""

    api: str = DEFAULT_API
    token: str | None = field(default=None, repr=False)
    retry: Retry = field(default_factory=Retry)

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.api)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise GitHubError(f"--github-api: {self.api[:80]!r} is not an http(s) URL")

    def get(self, path: str, *, retry: Retry | None = None, timeout: float = 30.0) -> Any:
        """The decoded JSON body of `GET {api}{path}`; raises crcr.http.HTTPError when it fails for good."""
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
        url = self.api.rstrip("/") + path
        return request("GET", url, token=self.token, headers=headers, retry=retry or self.retry, timeout=timeout).body

    def issue_labels(self, repo: str, number: int, *, retry: Retry | None = None, timeout: float = 30.0) -> list[str]:
        """The label names on issue or pull request `number` (the first 100, far more than a PR carries)."""
        body = self.get(f"/repos/{_repo(repo)}/issues/{number}/labels?per_page=100", retry=retry, timeout=timeout)
        if not isinstance(body, list):
            raise HTTPError(f"GET /repos/{repo}/issues/{number}/labels: expected a JSON list")
        return [item["name"] for item in body if isinstance(item, dict) and isinstance(item.get("name"), str)]

    def commit(self, repo: str, ref: str) -> Any:
        """`GET /repos/{repo}/commits/{ref}`: a commit by sha, branch or tag name."""
        return self.get(f"/repos/{_repo(repo)}/commits/{urllib.parse.quote(ref, safe='/')}")

    def branch(self, repo: str, name: str) -> Any:
        """`GET /repos/{repo}/branches/{name}`: the branch and its HEAD commit."""
        return self.get(f"/repos/{_repo(repo)}/branches/{urllib.parse.quote(name, safe='/')}")


def _repo(repo: str) -> str:
    if not REPO.fullmatch(repo):
        raise GitHubError(f"--repo: {repo[:80]!r} is not owner/name")
    return repo


def from_environment(api: str | None = None) -> GitHub:
    """A client for `api`, else `$GITHUB_API_URL`, else api.github.com, with `$GITHUB_TOKEN` when set."""
    return GitHub(api or os.environ.get("GITHUB_API_URL") or DEFAULT_API, os.environ.get("GITHUB_TOKEN") or None)
