"""`crcr resolve nightly|release|sha` against a local GitHub API server: the nightly source commit from the commit
message, a release branch's HEAD, a ref's full sha; 429, 5xx and dropped connections retried; 404s, messages without
a sha and exhausted retries as one `error:` line; the token sent and never shown."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from crcr.cli import main
from crcr.github import GitHub
from crcr.http import Retry
from crcr.resolve import ResolveError, resolve
from gate_support import read_github_output
from github_api import DROP, Fault, LocalGitHub

TOKEN = "ghp_resolve_secret_0123456789abcdef"
UP = "pytorch/pytorch"
SOURCE = "5b1c2a7f9e41aa6f11f08e3d9c1e4d205b1c2a7f"
OLDER = "0d5e7f60aa7011f09c1b2f3e4d5c6b7a0d5e7f60"
NIGHTLY = "e4d205b1c2a7f9e41aa6f11f08e3d9c1e4d205b1"
RELEASE = "a7f9e41aa6f11f08e3d9c1e4d205b1c2a7f9e41a"
FAST = Retry(attempts=4, base_delay=0.01)


@pytest.fixture
def api() -> Iterator[LocalGitHub]:
    with LocalGitHub(token=TOKEN) as server:
        server.add_commit(UP, NIGHTLY, f"2026-12-01 nightly release (reverts ({OLDER}) first) ({SOURCE})", "nightly")
        server.add_commit(UP, RELEASE, "[release/2.14] Cherry-pick the flip fix (#171300)")
        server.add_branch(UP, "release/2.14", RELEASE)
        yield server


@pytest.fixture
def crcr(api: LocalGitHub, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable:
    """Run `crcr resolve ...` against the local API: (exit code, stdout JSON or None, stderr)."""
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", api.url)
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)

    def run(*argv: str) -> tuple[int, dict | None, str]:
        code = main(["resolve", *argv])
        out, err = capsys.readouterr()
        assert TOKEN not in out + err
        return code, json.loads(out) if out else None, err

    return run


def test_nightly_is_the_last_sha_in_the_commit_message(crcr: Callable, api: LocalGitHub) -> None:
    code, found, err = crcr("nightly")
    assert (code, err) == (0, "")
    assert found == {"kind": "nightly", "ref": "nightly", "sha": SOURCE,
                     "source": f"commit message of nightly {NIGHTLY}"}  # fmt: skip
    assert api.requests == [(f"/repos/{UP}/commits/nightly", f"Bearer {TOKEN}")]


def test_a_release_branch_is_its_head(crcr: Callable, api: LocalGitHub) -> None:
    code, found, _ = crcr("release", "release/2.14")
    assert code == 0
    assert found == {"kind": "release", "ref": "release/2.14", "sha": RELEASE, "source": "branch release/2.14"}
    assert api.requests[0][0] == f"/repos/{UP}/branches/release/2.14"


def test_an_abbreviated_sha_is_the_full_one(crcr: Callable) -> None:
    assert crcr("sha", RELEASE[:9])[1] == {"kind": "sha", "ref": RELEASE[:9], "sha": RELEASE,
                                           "source": f"commit {RELEASE[:9]}"}  # fmt: skip


def test_another_repository(crcr: Callable, api: LocalGitHub) -> None:
    api.add_commit("octo/accel", SOURCE, "x", "nightly")
    code, _, err = crcr("nightly", "--repo", "octo/accel")
    assert code == 2
    assert err == "error: resolve nightly: the message of octo/accel's nightly HEAD names no (<40-hex sha>)\n"


def test_github_output_lines(crcr: Callable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "out"))
    _, found, _ = crcr("release", "release/2.14")
    assert read_github_output((tmp_path / "out").read_text()) == found


@pytest.mark.parametrize("faults", [[Fault(429, "0")], [Fault(500), Fault(502)], [Fault(503, "0"), Fault(DROP)]],
                         ids=["429", "500-502", "503-dropped"])  # fmt: skip
def test_transient_failures_are_retried(crcr: Callable, api: LocalGitHub, faults: list[Fault]) -> None:
    api.fail_next(*faults)
    code, found, err = crcr("nightly")
    assert (code, err) == (0, "")
    assert found["sha"] == SOURCE
    assert len(api.requests) == len(faults) + 1


def test_exhausted_retries_are_one_line(api: LocalGitHub) -> None:
    api.fail_next(*[Fault(503, "0")] * 4)
    with pytest.raises(ResolveError) as info:
        resolve(GitHub(api.url, TOKEN, FAST), UP, "nightly")
    assert str(info.value) == (f"resolve nightly: GET {api.url}/repos/{UP}/commits/nightly: gave up after 4 attempts "
                               "(last: HTTP 503)")  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("release", "release/9.99"), "error: resolve release 'release/9.99': GET {url}/repos/pytorch/pytorch/"
                                      "branches/release/9.99: HTTP 404 "),
        (("sha", "deadbeef00"), "error: resolve sha 'deadbeef00': GET {url}/repos/pytorch/pytorch/commits/deadbeef00: "
                                "HTTP 404 "),
        (("release", "main"), "error: resolve release 'main': expected a branch release/<version>\n"),
        (("release", "release/../x"), "error: resolve release 'release/../x': expected a branch release/<version>\n"),
        (("sha", "a b"), "error: resolve sha 'a b': not a commit sha or a valid ref name\n"),
        (("nightly", "--repo", "not a repo"), "error: --repo: 'not a repo' is not owner/name\n"),
        (("nightly", "--github-api", "file:///etc"), "error: --github-api: 'file:///etc' is not an http(s) URL\n"),
    ],
)  # fmt: skip
def test_nothing_resolved_is_one_line(crcr: Callable, api: LocalGitHub, argv: tuple, message: str) -> None:
    code, found, err = crcr(*argv)
    assert (code, found) == (2, None)
    assert err.startswith(message.format(url=api.url))
    assert err.count("\n") == 1


def test_a_bad_token_is_named_not_shown(crcr: Callable, monkeypatch: pytest.MonkeyPatch, api: LocalGitHub) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_wrong_secret_value")
    code, _, err = crcr("nightly")
    assert code == 2
    assert (
        err == f"error: resolve nightly: GET {api.url}/repos/{UP}/commits/nightly: HTTP 401 "
        '{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}\n'
    )
    assert "ghp_wrong" not in err


def test_no_token_sends_no_authorization(crcr: Callable, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    with LocalGitHub() as open_api:
        open_api.add_commit(UP, SOURCE, "x")
        code, found, _ = crcr("sha", SOURCE, "--github-api", open_api.url)
        assert (code, found["sha"]) == (0, SOURCE)
        assert open_api.requests == [(f"/repos/{UP}/commits/{SOURCE}", None)]


def test_usage_errors_exit_2(crcr: Callable) -> None:
    assert crcr()[0] == 2
    assert crcr("release")[0] == 2
    assert crcr("weekly")[0] == 2
