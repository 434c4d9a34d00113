"""A real run of `crcr ci` on the CPU-fallback device (fallbackdev, a privateuse1 backend module from testreuse's
tests): a variant's combination runs with its own folder and keeps its results, durations, history and report row
apart; a device without the variant skips it with a note; and a combination whose environment cannot be made is an
`error` of its own while the others' results reach the record and the report. The backend build, the torch download
and the environment are this interpreter's (each is tested on its own); everything else is the pipeline's."""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

import pytest
import yaml
from crcr.ci import build, combinations, cores, envs, history, runner
from crcr.ci.model import BuildResult, Candidate, CombinationResult, RunRecord, from_json
from crcr.cli import main
from crcr.relay.server import running_relay

REPO = Path(__file__).resolve().parents[1]
REAL_CORE = combinations.core
REAL_TORCH_WHEEL = cores.torch_wheel


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "commit", "-q", "-m", message)


def fake_core(version: str, cache: Path) -> Candidate:
    """A core candidate without fetching torch: planning only needs its name and sha."""
    return Candidate("core", version, version, f"wheel-{version}")


EAGER_TESTS = "TestViewOps::test_view_view"
VARIANT_TESTS = "TestViewOps::test_transpose_view"


def _config(names: str) -> str:
    return (
        "test_suite_config:\n  files:\n    - path: ${TORCH_ROOT}/test/test_view_ops.py\n"
        f"      unlisted_test_mode: skip\n      tests:\n        - names: [{names}]\n          mode: mandatory_success\n"
    )


def _profile(repo: Path, **fields: object) -> dict:
    """fallbackdev's profile with `fields`, into the repository. This interpreter also holds ring, which loads
    itself with torch unless TORCH_DEVICE_BACKEND_AUTOLOAD=0 reaches the shards: the profile passes it on."""
    profile = yaml.safe_load((REPO / "configs" / "devices" / "fallbackdev.yaml").read_text())
    profile.update(fields, environment=["TORCH_DEVICE_BACKEND_AUTOLOAD"])
    (repo / "configs" / "devices").mkdir(parents=True, exist_ok=True)
    (repo / "configs" / "devices" / "fallbackdev.yaml").write_text(yaml.safe_dump(profile))
    return profile


@pytest.fixture
def fallback_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[tuple[Path, Path]]]:
    """A backend repository running one embedded test file on fallbackdev, from a test copy of its profile with a
    `compile` variant whose folder selects other tests (so a result shows which folder it ran). The backend build,
    the torch download and the environment are this interpreter's (they are tested on their own); everything else
    is the pipeline's. Returns the repository and the (checkout, torch wheel) of every build asked for."""
    repo = tmp_path / "backend"
    tree = repo / combinations.EMBEDDED_TREE / "test"
    tree.mkdir(parents=True)
    shutil.copy(REPO / combinations.EMBEDDED_TREE / "test" / "test_view_ops.py", tree)
    profile = _profile(repo, variants={"compile": {"embedded": "configs/fallbackdev-compile"}})
    for folder, names in (
        (profile["configs"]["embedded"], EAGER_TESTS),
        ("configs/fallbackdev-compile", VARIANT_TESTS),
    ):
        (repo / folder).mkdir(parents=True, exist_ok=True)
        (repo / folder / "embedded.yaml").write_text(_config(names))
    (repo / "configs" / "ci.yaml").write_text(
        "device: fallbackdev\ncore: {versions: ['2.13.0']}\nshards: {count: 1, parallel: 1}\nretries: 0\n"
        "variants: [compile]\n"
    )
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "backend")
    for path in profile["pythonpath"]:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).symlink_to(REPO / path)  # the fallbackdev module and its C++ sources, compiled once per machine
    wheel = tmp_path / "torch-2.13.0-py3-none-any.whl"
    wheel.write_bytes(b"stand-in")
    builds: list[tuple[Path, Path]] = []

    def fake_build(checkout: Path, torch_wheel: Path, cache: Path, *_how: object, **_options: object) -> BuildResult:
        builds.append((checkout, torch_wheel))
        return BuildResult(True)

    monkeypatch.setattr(combinations, "core", fake_core)
    monkeypatch.setattr(cores, "torch_wheel", lambda version, cache: wheel)
    monkeypatch.setattr(build, "build_backend", fake_build)
    monkeypatch.setattr(envs, "environment", lambda *args, **options: Path(sys.executable))
    # this interpreter may hold another backend that autoloads and takes privateuse1 (a profile's own environment
    # holds only its wheels)
    monkeypatch.setenv("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    return repo, builds


def test_a_variant_runs_end_to_end_as_a_combination_of_its_own(fallback_repo) -> None:
    repo, builds = fallback_repo
    cache = repo.parent / "cache"
    status = main(["ci", "--config", str(repo / "configs" / "ci.yaml"), "--repo", str(repo), "--cache", str(cache)])
    (run_dir,) = (cache / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert status == 0, summary["verdict"]
    rows = {c["name"]: c for c in summary["combinations"]}
    assert list(rows) == ["primary", "primary+compile"]
    assert [rows[n]["variant"] for n in rows] == ["", "compile"]
    assert rows["primary"]["matrix"] == rows["primary+compile"]["matrix"] == "primary"
    record = json.loads((run_dir / "record.json").read_text())
    assert [from_json(CombinationResult, r).combination.variant for r in record["combinations"]] == ["", "compile"]
    ran = {r["combination"]["name"]: {t["nodeid"] for t in r["tests"]} for r in record["combinations"]}
    assert ran["primary"]
    assert all("::test_view_view_" in n for n in ran["primary"])
    assert ran["primary+compile"]
    assert all("::test_transpose_view_" in n for n in ran["primary+compile"])  # the variant's folder
    assert {t["outcome"] for r in record["combinations"] for t in r["tests"]} == {"passed"}
    assert len(builds) == 2  # both combinations ask for the backend x core built once (keyed by sha)
    assert len(set(builds)) == 1
    assert "primary matrix, compile variant" in (run_dir / "report.html").read_text()
    assert (run_dir / "primary_compile" / "shard-1" / "results.jsonl").stat().st_size > 0
    durations = json.loads((cache / "durations.json").read_text())["fallbackdev/embedded"]
    assert {"primary", "primary+compile"} <= set(durations)
    db = cache / "history.sqlite"
    greens = {name: history.last_green(db, name) for name in ran}
    assert {name: set(green[2]) for name, green in greens.items() if green} == ran  # each its own last green run


def test_a_device_without_the_variant_runs_the_same_ci_yaml_and_skips_it(
    fallback_repo, capsys: pytest.CaptureFixture[str]
) -> None:
    """`nox -s ci -- --device fallbackdev` with a ci.yaml asking for `compile`, which only another device declares:
    the plain combinations run and pass, and the variant is one line on stderr and a note in summary.json."""
    repo, builds = fallback_repo
    _profile(repo)  # the real one: no variants
    cache = repo.parent / "cache"
    config = repo / "configs" / "ci.yaml"
    assert "variants: [compile]" in config.read_text()
    argv = ["ci", "--config", str(config), "--device", "fallbackdev", "--repo", str(repo), "--cache", str(cache)]
    status = main(argv)
    err = capsys.readouterr().err.splitlines()
    (run_dir,) = (cache / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert status == 0, summary["verdict"]
    assert [line for line in err if "variant" in line] == [
        "variant compile: not declared by device profile fallbackdev; skipped"
    ]
    assert not any(line.startswith("error:") for line in err)
    assert summary["skipped_variants"] == ["compile"]
    assert [(c["name"], c["variant"], c["status"]) for c in summary["combinations"]] == [("primary", "", "passed")]
    assert json.loads((run_dir / "record.json").read_text())["skipped_variants"] == ["compile"]
    assert "compile (not declared by device profile fallbackdev)" in (run_dir / "report.html").read_text()
    assert not (run_dir / "primary_compile").exists()
    assert len(builds) == 1


def test_a_combination_whose_environment_fails_is_an_error_and_the_others_are_reported(
    fallback_repo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first combination's environment cannot be made (uv itself fails: its target is a file): that combination
    is `error` with uv's first line, and the next one still runs, so the record, summary and report hold both."""
    repo, _ = fallback_repo
    cache = repo.parent / "cache"
    blocked = repo.parent / "blocked-venv"
    blocked.write_text("a file where the venv would go")
    made: list[str] = []

    def first_fails(*_args: object, **_options: object) -> Path:
        made.append("env")
        return envs.venv(blocked, cache) if len(made) == 1 else Path(sys.executable)

    monkeypatch.setattr(envs, "environment", first_fails)
    status = main(["ci", "--config", str(repo / "configs" / "ci.yaml"), "--repo", str(repo), "--cache", str(cache)])
    out, err = capsys.readouterr()
    assert status == 1
    assert "Traceback" not in err
    (run_dir,) = (cache / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = {c["name"]: c for c in summary["combinations"]}
    assert rows["primary"]["status"] == "error"
    assert rows["primary"]["reason"].startswith(f"environment: could not create a venv at {blocked}")
    assert rows["primary+compile"]["status"] == "passed"
    assert summary["verdict"].startswith("red: primary error")
    record = json.loads((run_dir / "record.json").read_text())
    compiled = next(r for r in record["combinations"] if r["combination"]["name"] == "primary+compile")
    assert compiled["tests"]
    assert {t["outcome"] for t in compiled["tests"]} == {"passed"}
    assert "could not create a venv" in (run_dir / "report.html").read_text()
    assert f"summary: {run_dir / 'summary.json'}" in out


def test_an_older_backend_ref_runs_with_its_own_configs_and_profile(fallback_repo) -> None:
    """The backend matrix runs an older ref whose config folder selects other tests than HEAD's: each combination
    runs the tests its own ref's configs select, from the ref's own checkout and device profile."""
    repo, builds = fallback_repo
    commit(repo, "the backend module, as the repository holds it")  # the pythonpath links, so each ref has them
    old = git(repo, "rev-parse", "HEAD")
    folder = _profile(repo, source={"refs": [old]})["configs"]["embedded"]  # the backend matrix: HEAD's profile
    (repo / folder / "embedded.yaml").write_text(_config(VARIANT_TESTS))  # HEAD's configs pick other tests
    (repo / "configs" / "ci.yaml").write_text(
        "device: fallbackdev\ncore: {versions: ['2.13.0']}\nshards: {count: 1, parallel: 1}\nretries: 0\n"
        "matrices: [backend]\n"
    )
    commit(repo, "HEAD's configs select the transpose tests")
    cache = repo.parent / "cache"
    status = main(["ci", "--config", str(repo / "configs" / "ci.yaml"), "--repo", str(repo), "--cache", str(cache)])
    (run_dir,) = (cache / "runs").iterdir()
    record = json.loads((run_dir / "record.json").read_text())
    assert status == 0, record["verdict"]
    ran = {r["combination"]["name"]: {t["nodeid"] for t in r["tests"]} for r in record["combinations"]}
    assert set(ran) == {"primary", f"backend@{old[:12]}"}
    assert ran["primary"]
    assert all("::test_transpose_view_" in n for n in ran["primary"])  # HEAD's configs
    assert ran[f"backend@{old[:12]}"]
    assert all("::test_view_view_" in n for n in ran[f"backend@{old[:12]}"])  # the older ref's own configs
    assert {str(checkout.name) for checkout, _ in builds} == {old[:12], git(repo, "rev-parse", "HEAD")[:12]}


def test_a_recorded_run_reproduces_from_its_run_directory(
    fallback_repo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`crcr reproduce` reruns a recorded run from what its run directory pinned (configs, profile, limits,
    third-party versions), so today's configs selecting other tests change nothing; a pinned file that no longer
    matches the run's digest is one line naming it, exit 2."""
    repo, _ = fallback_repo
    wheel = repo.parent / "torch-2.13.0-py3-none-any.whl"  # the fixture's stand-in, under its real digest here
    monkeypatch.setattr(combinations, "core", lambda v, cache: Candidate("core", v, v, cores.wheel_sha256(wheel)))
    cache = repo.parent / "cache"
    argv = ["--config", str(repo / "configs" / "ci.yaml"), "--repo", str(repo), "--cache", str(cache)]
    assert main(["ci", *argv, "--only", "primary"]) == 0
    (run_dir,) = (cache / "runs").iterdir()
    pinned = run_dir / "primary" / "pinned"
    assert any(line.startswith("pytest==") for line in (pinned / "requirements.txt").read_text().splitlines())
    folder = _profile(repo)["configs"]["embedded"]
    (repo / folder / "embedded.yaml").write_text(_config(VARIANT_TESTS))  # today's configs pick other tests
    capsys.readouterr()

    assert main(["reproduce", str(run_dir), "--repo", str(repo)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "every outcome is the same"
    assert any(line.startswith("primary: rerunning ") for line in out)
    reran = runner.read_records(run_dir / "reproduce" / "primary" / "shard-1" / "results.jsonl")
    assert {r["outcome"] for r in reran if "::test_view_view_" in r["nodeid"]} == {"passed"}  # the recorded tests

    (pinned / "configs" / "embedded.yaml").write_text(_config(VARIANT_TESTS))
    assert main(["reproduce", str(run_dir), "--repo", str(repo)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: primary: {pinned / 'configs'}: differs from the config folder the run recorded"]


def _local_torch_wheel() -> Path:
    """The wheel this interpreter's torch was installed from (the nox sessions take it from `.wheelhouse/`)."""
    import torch

    for wheel in sorted((REPO / ".wheelhouse").glob("torch-*.whl")):
        if (
            cores.wheel_version(wheel) == torch.__version__
            and cores.wheel_git_version(wheel) == torch.version.git_version
        ):
            return wheel
    pytest.skip(f"no wheel of this interpreter's torch {torch.__version__} in {REPO / '.wheelhouse'}")


def _dispatch_push(repo: Path, commit_sha: str, cache: Path) -> int:
    """`crcr ci --payload` on fallbackdev for a real-shaped push to main naming `commit_sha`, on the local relay."""
    push = json.loads((REPO / "packages/dispatch/tests/payloads/push_main.json").read_text())
    push["payload"]["after"] = push["payload"]["head_commit"]["id"] = push["payload"]["commits"][-1]["id"] = commit_sha
    payload = repo.parent / "payload.json"
    payload.write_text(json.dumps(push))
    return main(["ci", "--payload", str(payload), "--policy", str(REPO / "configs" / "crcr.yaml"), "--as",
                 "acme/accel", "--device", "fallbackdev", "--config", str(repo / "configs" / "ci.yaml"),
                 "--repo", str(repo), "--cache", str(cache)])  # fmt: skip


def test_a_dispatch_runs_the_suite_at_its_commit_and_says_what_the_core_is_to_it(
    fallback_repo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`crcr ci --payload` on a push naming an upstream commit older than the checkout's HEAD: the suite runs at that
    commit (where upstream's test_view_view is broken; at HEAD it passes), the record names the core that ran (a
    CI-built wheel source: its version, sha256 and git_version, the torch of the environment), and the verdict on the
    relay says what that core is to the dispatched commit, naming no PR."""
    repo, _ = fallback_repo
    monkeypatch.setattr(combinations, "core", REAL_CORE)  # the core is obtained from its source, as configured
    monkeypatch.setattr(cores, "torch_wheel", REAL_TORCH_WHEEL)
    import torch

    wheel = _local_torch_wheel()
    upstream = repo.parent / "pytorch"
    (upstream / "test").mkdir(parents=True)
    original = (REPO / combinations.EMBEDDED_TREE / "test" / "test_view_ops.py").read_text()
    broken = original.replace(
        "self._assert_writes_through(t, t.view(30))", "self._assert_writes_through(t, t.view(30).clone())"
    )
    assert broken != original
    (upstream / "test" / "test_view_ops.py").write_text(broken)
    git(upstream, "init", "-q", "-b", "main")
    commit(upstream, "a change that breaks view's aliasing")
    dispatched = git(upstream, "rev-parse", "HEAD")
    (upstream / "test" / "test_view_ops.py").write_text(original)
    commit(upstream, "its revert")
    _profile(repo, configs={"embedded": "configs/fallbackdev", "upstream": "configs/fallbackdev"})
    (repo / "configs" / "ci.yaml").write_text(
        f"device: fallbackdev\ncore: {{versions: [{{wheel: '{wheel}', name: ci-wheel}}]}}\n"
        f"suite: {{root: '{upstream}'}}\nshards: {{count: 1, parallel: 1}}\nretries: 0\nmatrices: []\n"
    )
    commit(repo, "upstream suite")
    cache = repo.parent / "cache"
    status = _dispatch_push(repo, dispatched, cache)
    out = capsys.readouterr().out
    assert status == 1, out
    assert f"gate: run primary at {dispatched}" in out
    (run_dir,) = (cache / "runs").iterdir()
    (result,) = from_json(RunRecord, json.loads((run_dir / "record.json").read_text())).combinations
    combination = result.combination
    assert (combination.suite.name, combination.suite.sha) == (str(upstream), dispatched)
    core = combination.core
    assert (core.name, core.version, core.sha) == ("ci-wheel", torch.__version__, cores.wheel_sha256(wheel))
    assert core.git == torch.version.git_version  # the torch the shards imported
    failed = {t.nodeid for t in result.tests if t.outcome == "failed"}
    assert failed
    assert all("::test_view_view_" in n for n in failed)  # the dispatched commit's test file, not HEAD's
    said = (f"the core (git {core.git[:12]}) is not the dispatched commit {dispatched[:12]}, and whether it contains "
            "it is not known: the suite checkout does not hold both commits; the suite was taken at it")  # fmt: skip
    assert combination.dispatched == said
    with running_relay(cache / "relay.sqlite", allowlist={"acme/accel": 2}) as relay:
        (job,) = relay.jobs("acme/accel")
    assert job["conclusion"] == "failure"
    assert job["verdict"]["summary"].endswith(f"; {said}")
    assert "suspected_upstream" not in job["verdict"]

    # The same commit through `crcr ci --upstream-sha` (how the workflow's jobs take it), on a core built from the
    # checkout's later commit by a configured command: git, asked in the checkout, says that core contains it.
    (upstream / "build_torch.py").write_text(BUILD_TORCH)
    commit(upstream, "the build script")
    later = git(upstream, "rev-parse", "HEAD")
    (repo / "configs" / "ci.yaml").write_text(
        f"device: fallbackdev\ncore: {{versions: [{{build: '{sys.executable} build_torch.py {wheel} {{out}}', "
        f"checkout: '{upstream}', ref: main}}]}}\nsuite: {{root: '{upstream}'}}\nshards: {{count: 1, parallel: 1}}\n"
        "retries: 0\nmatrices: []\n"
    )
    commit(repo, "a source-built core")
    argv = ["--config", str(repo / "configs" / "ci.yaml"), "--repo", str(repo), "--cache", str(cache)]
    assert main(["ci", "--device", "fallbackdev", "--upstream-sha", dispatched, *argv]) == 1
    run_dir = max((cache / "runs").iterdir())
    record = from_json(RunRecord, json.loads((run_dir / "record.json").read_text()))
    (result,) = record.combinations
    assert record.trigger["sha"] == dispatched
    assert (result.combination.core.name, result.combination.core.git) == ("source", later)
    assert result.combination.suite.sha == dispatched
    assert result.combination.dispatched == (
        f"the core (git {later[:12]}) contains the dispatched commit {dispatched[:12]} but was not built from it; "
        "the suite was taken at it"
    )


#: PyTorch's source build at a commit takes an hour on a large runner; this stands in for it: the real torch wheel
#: with `torch/version.py` recording the commit it was run at, as PyTorch's build does.
BUILD_TORCH = """
import subprocess, sys, zipfile
from pathlib import Path

wheel, out = Path(sys.argv[1]), Path(sys.argv[2])
sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
built = zipfile.ZipFile(out / wheel.name, "w", zipfile.ZIP_DEFLATED, compresslevel=1)
with zipfile.ZipFile(wheel) as source, built:
    for info in source.infolist():
        data = source.read(info)
        if info.filename == "torch/version.py":
            lines = [line for line in data.decode().splitlines() if not line.startswith("git_version")]
            data = "\\n".join([*lines, f"git_version = '{sha}'", ""]).encode()
        built.writestr(info, data, zipfile.ZIP_DEFLATED, 1)
"""


BREAK_FLIP = """
    _broken_flip = torch.library.Library("aten", "IMPL")  # this change forgets to flip
    _broken_flip.impl("flip", lambda self, dims: self.clone(), "PrivateUse1")
    _KEPT.append(_broken_flip)
"""


def test_failures_follow_the_backend_ref_that_broke_an_op_when_backend_and_core_both_moved(fallback_repo) -> None:
    """A green run of the flip tests on one backend commit and core; then a backend commit that breaks aten::flip
    for the device and a newer core, both at once. The pipeline reruns the failures with each candidate pinned back,
    each probe set up like any combination from its own checkout: they pass only on the older backend ref, so they
    follow the backend. (The two cores are stand-ins for this interpreter's torch: what moved is told by sha.)"""
    repo, builds = fallback_repo
    module_dir = repo / "packages" / "testreuse" / "tests" / "backends"
    module_dir.unlink()  # the fixture's link: this backend's module changes between its commits
    shutil.copytree(REPO / "packages" / "testreuse" / "tests" / "backends", module_dir,
                    ignore=shutil.ignore_patterns("__pycache__", "test_*.py", "conftest.py"))  # fmt: skip
    shutil.copy(
        REPO / combinations.EMBEDDED_TREE / "test" / "test_shape_ops.py", repo / combinations.EMBEDDED_TREE / "test"
    )
    folder = repo / _profile(repo)["configs"]["embedded"]
    (folder / "embedded.yaml").write_text(
        "test_suite_config:\n  files:\n    - path: ${TORCH_ROOT}/test/test_shape_ops.py\n      unlisted_test_mode: "
        "skip\n      tests:\n        - names: [TestShapeOps::test_flip]\n          mode: mandatory_success\n"
    )
    ci = "device: fallbackdev\nshards: {count: 1, parallel: 1}\nretries: 0\nmatrices: []\n"
    (repo / "configs" / "ci.yaml").write_text(ci + "core: {versions: ['2.13.0']}\n")
    commit(repo, "the flip tests on a backend that flips")
    good = git(repo, "rev-parse", "HEAD")
    cache = repo.parent / "cache"
    argv = ["ci", "--config", str(repo / "configs" / "ci.yaml"), "--repo", str(repo), "--cache", str(cache)]
    assert main(argv) == 0

    source = (module_dir / "fallback_backend.py").read_text()
    anchor = "    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)\n"
    assert anchor in source
    broken = source.replace(anchor, anchor + BREAK_FLIP).replace(
        "class BackendLoadError", "_KEPT = []\n\n\nclass BackendLoadError"
    )
    (module_dir / "fallback_backend.py").write_text(broken)
    (repo / "configs" / "ci.yaml").write_text(ci + "core: {versions: ['2.13.0', '2.14.1']}\n")
    commit(repo, "a faster flip (it forgets to flip) and the next core")
    head = git(repo, "rev-parse", "HEAD")
    assert main(argv) == 1
    run_dir = max((cache / "runs").iterdir())
    record = from_json(RunRecord, json.loads((run_dir / "record.json").read_text()))
    (result,) = record.combinations
    assert (result.combination.backend.sha, result.combination.core.name) == (head, "2.14.1")
    failing = [t for t in result.tests if t.failing]
    assert failing
    assert all("::test_flip_" in t.nodeid for t in failing)
    assert {t.follows for t in failing} == {"backend"}
    assert {t.classification.klass for t in failing if t.classification} == {"backend"}
    reasons = {t.classification.reason for t in failing if t.classification}
    assert all("backend pinned back" in r for r in reasons), reasons
    assert {checkout.name for checkout, _ in builds} >= {good[:12], head[:12]}  # the probe ran the older ref's checkout
    assert reasons == {
        "it passes with only the backend pinned back to its last-green version "
        f"(probes run: primary~backend@HEAD:{good[:12]}, primary~core@2.13.0)"
    }
    probes = run_dir / "attribution"
    old_backend = runner.read_records(probes / f"primary_backend@HEAD_{good[:12]}" / "shard-1" / "results.jsonl")
    old_core = runner.read_records(probes / "primary_core@2.13.0" / "shard-1" / "results.jsonl")
    ran = {t.nodeid for t in failing}
    assert {r["outcome"] for r in old_backend if r["nodeid"] in ran} == {"passed"}  # the older ref's flip
    assert {r["outcome"] for r in old_core if r["nodeid"] in ran} == {"failed"}  # HEAD's flip on the older core


def test_a_dispatch_runs_on_the_build_made_from_its_commit_found_on_an_index(
    fallback_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`core: {versions: [{nightly: dispatched}]}` against a local index serving this interpreter's torch wheel (a
    plain HTTP server, no range requests: each wheel is read once): a push naming the commit that wheel was built
    from runs on it, and the record says the core was built from the dispatched commit."""
    repo, _ = fallback_repo
    monkeypatch.setattr(combinations, "core", REAL_CORE)
    monkeypatch.setattr(cores, "torch_wheel", REAL_TORCH_WHEEL)
    import torch

    wheel = _local_torch_wheel()
    (tmp_path / "index" / "files").mkdir(parents=True)
    (tmp_path / "index" / "files" / wheel.name).symlink_to(wheel)
    (tmp_path / "index" / "simple" / "torch").mkdir(parents=True)
    link = f'<a href="../../files/{urllib.parse.quote(wheel.name)}">{wheel.name}</a>'
    (tmp_path / "index" / "simple" / "torch" / "index.html").write_text(link)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "index"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    index = f"http://127.0.0.1:{server.server_address[1]}/simple"
    (repo / "configs" / "ci.yaml").write_text(
        f"device: fallbackdev\ncore: {{versions: [{{nightly: dispatched, index: '{index}'}}]}}\n"
        "shards: {count: 1, parallel: 1}\nretries: 0\nmatrices: []\n"
    )
    commit(repo, "the core built from the dispatched commit")
    built_from = torch.version.git_version
    cache = repo.parent / "cache"
    try:
        status = _dispatch_push(repo, built_from, cache)
    finally:
        server.shutdown()
    out = capsys.readouterr().out
    assert status == 0, out
    (run_dir,) = (cache / "runs").iterdir()
    (result,) = from_json(RunRecord, json.loads((run_dir / "record.json").read_text())).combinations
    core = result.combination.core
    assert (core.name, core.version, core.git, core.sha) == (
        "nightly",
        torch.__version__,
        built_from,
        cores.wheel_sha256(wheel),
    )
    assert result.combination.dispatched == (
        f"the core was built from the dispatched commit {built_from[:12]}; the suite is the embedded tree, not "
        "upstream's at it"
    )
    assert {t.outcome for t in result.tests} == {"passed"}
