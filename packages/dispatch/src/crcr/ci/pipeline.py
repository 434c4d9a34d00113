"""The downstream CI job: every combination built once, its suite sharded and run on the device, failures
retried, classified and attributed, the run recorded, reported and kept in the history.

No device is named here: the device profile says which packages, backend module and config folders to use.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import os
import platform
import secrets
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from crcr.ci import (
    ancestry,
    attribution,
    backendbuild,
    backendsource,
    build,
    combinations,
    compat,
    cores,
    coresource,
    envs,
    history,
    isolation,
    pinning,
    report,
    reuse,
    runner,
    shardenv,
    worktrees,
)  # fmt: skip
from crcr.ci.ciconfig import CIConfig, CIConfigError, DeviceProfile, load_profile, split_variants
from crcr.ci.classify import classify, moved_since, verdict
from crcr.ci.digest import file_sha256
from crcr.ci.model import (
    Artifact,
    BuildResult,
    Candidate,
    Combination,
    CombinationResult,
    Prepared,
    RunRecord,
    ShardResult,
    TestOutcome,
    to_json,
)

T = TypeVar("T")
#: Inductor's compiled kernels for every combination: keyed by torch's own inputs, so shared safely, and reclaimed
#: with the rest of the cache instead of filling the machine's temporary folder.
INDUCTOR_CACHE = "inductor"


class Progress(Protocol):
    def phase(self, combination: str, text: str) -> None: ...
    def tests(self, combination: str, done: int, total: int, eta: float | None = None) -> None: ...
    def done(self, combination: str, text: str) -> None: ...
    def note(self, text: str) -> None: ...


class QuietProgress:
    def phase(self, combination: str, text: str) -> None:
        pass

    def tests(self, combination: str, done: int, total: int, eta: float | None = None) -> None:
        pass

    def done(self, combination: str, text: str) -> None:
        pass

    def note(self, text: str) -> None:
        pass


@dataclass
class Context:
    repo: Path  # the backend repository (its HEAD is the latest backend; its configs are the CI's)
    cache: Path  # worktrees, wheelhouses, builds, environments, history, durations, runs
    config: CIConfig
    profile: DeviceProfile
    progress: Progress = field(default_factory=QuietProgress)
    shard_env: Mapping[int, Mapping[str, str]] | None = None  # extra environment for one shard (fault tests)
    only: tuple[str, ...] = ()  # combination names to run (default: all)
    reuse: bool = True  # reuse a recorded run's results when a combination's inputs are identical (--no-cache: off)
    commit: str = ""  # the dispatched upstream commit (--upstream-sha), when the trigger does not name one
    #: The durations store is read by a plan (preparing ahead) while a finished combination writes it, through the
    #: testreuse of its own environment: an older backend ref's may not replace the file whole.
    durations_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @functools.cached_property
    def backend_repo(self) -> Path:
        """Where the backend's refs resolve: this repository, or the cache's mirror of the vendor's (fetched once
        a run)."""
        return backendsource.repository(self.profile.origin, self.repo, self.cache)

    @property
    def history(self) -> Path:
        return self.cache / "history.sqlite"

    @property
    def durations(self) -> Path:
        return self.cache / "durations.json"

    def durations_job(self, combination: Combination) -> str:
        """Whose times plan this combination: this device's runs of the same suite."""
        return runner.durations_job(self.profile.name, combinations.suite_kind(combination.suite))

    def scope(self, combination: Combination) -> history.Scope:
        """The history this combination is compared against: the same device and the same suite root."""
        return history.Scope(self.profile.name, combination.suite.name)


def run(ctx: Context, trigger: Mapping[str, object]) -> tuple[RunRecord, Path]:
    """The whole job on this machine; returns the record and the run directory (record.json, summary.json,
    report.html).

    The next combinations are prepared (checked out, built, installed, collected, planned) one after another in a
    second thread while this one runs the tests of the current one: a build's single-threaded links, an install's
    disk waits, a collection's one process and a shard tail's idle core are filled by the other's work, and the
    results still come in the planned order.
    """
    record, run_dir, planned = start(ctx, trigger)
    order = by_build(planned)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="prepare") as ahead:
        readied = [ahead.submit(ready, ctx, c, run_dir / safe_name(c.name)) for c in order]
        try:
            for combination, future in zip(order, readied, strict=True):
                prepared, started = future.result()
                if isinstance(prepared, CombinationResult):  # ended in preparation, and said so then
                    record.combinations.append(prepared)
                    continue
                step = functools.partial(run_prepared, ctx, prepared, run_dir / safe_name(combination.name))
                result = settled(ctx, combination, step)
                result.wall_seconds = round(time.monotonic() - started, 3)
                ctx.progress.done(combination.name, outcome_line(result))
                record.combinations.append(result)
        finally:
            for future in readied:  # an interrupted run builds nothing more
                future.cancel()
    names = [c.name for c in planned]
    record.combinations.sort(key=lambda result: names.index(result.combination.name))
    conclude(ctx, record, run_dir)
    return record, run_dir


def by_build(planned: list[Combination]) -> list[Combination]:
    """The combinations in the order they run: those sharing a build (a variant and its plain combination) one
    after another, in the planned order of their first. The tests of one build then run while the next is built,
    instead of waiting for it."""
    builds: dict[tuple[str, str], list[Combination]] = {}
    for combination in planned:
        builds.setdefault((combination.backend.sha, combination.core.sha), []).append(combination)
    return [combination for group in builds.values() for combination in group]


def ready(ctx: Context, combination: Combination, workdir: Path) -> tuple[Prepared | CombinationResult, float]:
    """The combination prepared, or the result that ended it (an error included, said at once), and when its
    preparation began."""
    started = time.monotonic()
    prepared = settled(ctx, combination, functools.partial(prepare, ctx, combination, workdir))
    if isinstance(prepared, CombinationResult):
        prepared.wall_seconds = round(time.monotonic() - started, 3)
        ctx.progress.done(combination.name, outcome_line(prepared))
    return prepared, started


#: What can end one combination early without being a bug: its checkout, core, build, environment, collection,
#: shards, durations or history, or the machine under them. The run goes on with the next combination.
COMBINATION_ERRORS: tuple[type[Exception], ...] = (
    worktrees.WorktreeError, cores.CoreError, build.BuildError, envs.EnvError, runner.RunnerError,
    isolation.IsolationError, history.HistoryError, CIConfigError, OSError,
)  # fmt: skip
#: The step each kind of error comes from, as the combination's reason says it.
ERROR_STEPS = {
    worktrees.WorktreeError: "checkout", cores.CoreError: "core", build.BuildError: "build",
    envs.EnvError: "environment", runner.RunnerError: "runner", isolation.IsolationError: "isolation",
    history.HistoryError: "history", CIConfigError: "device profile", OSError: "machine",
}  # fmt: skip


def settled(ctx: Context, combination: Combination, step: Callable[[], T]) -> T | CombinationResult:
    """`step()`, or the combination's `error` result naming the step and its first error line: one combination
    whose environment cannot be made must not cost the others their results, the record or the report."""
    try:
        return step()
    except COMBINATION_ERRORS as exc:
        result = CombinationResult(combination, "error", reason=error_reason(exc))
        ctx.progress.done(combination.name, outcome_line(result))
        return result


def error_reason(exc: BaseException) -> str:
    """`STEP: first line of the error`."""
    kind = next((name for cls, name in ERROR_STEPS.items() if isinstance(exc, cls)), type(exc).__name__)
    text = str(exc).strip().splitlines()
    return f"{kind}: {text[0][:300] if text else type(exc).__name__}"


def start(ctx: Context, trigger: Mapping[str, object]) -> tuple[RunRecord, Path, list[Combination]]:
    """A new run: its directory, its (empty) record, and the combinations it will run. A variant ci.yaml asks for
    that the device profile does not declare is skipped: one note, and the record's `skipped_variants`."""
    started = datetime.datetime.now(datetime.UTC)
    history.runs(ctx.history)  # a history file that is not ours stops the run here, in one line, before any build
    seed_durations(ctx)
    run_id = started.strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)
    run_dir = ctx.cache / "runs" / run_id
    run_dir.mkdir(parents=True)
    where = isolation.isolation(ctx.config.isolation, ctx.config.image)
    if isinstance(where, isolation.DockerIsolation):
        ctx.progress.phase("setup", f"checking the container engine and image {where.image}")
        where.check(ctx.repo, ctx.cache / "docker.log")
    variants, skipped = split_variants(ctx.config, ctx.profile)
    for name in skipped:  # ci.yaml serves every device profile; this one has no config folders for the variant
        ctx.progress.note(f"variant {name}: not declared by device profile {ctx.profile.name}; skipped")
    config = dataclasses.replace(ctx.config, variants=variants)
    commit = str(trigger.get("sha") or ctx.commit)
    core_of = functools.partial(_fetch_core, ctx, commit=commit)
    planned = combinations.plan(
        config, ctx.profile.origin, ctx.backend_repo, ctx.repo, ctx.cache, core_of=core_of, suite_at=commit
    )
    if ctx.only:
        planned = [c for c in planned if c.name in ctx.only]
    if commit:
        planned = [dataclasses.replace(c, dispatched=dispatched(c, commit)) for c in planned]
    for combination in planned:  # a profile without this suite's config folder stops the run before any build
        ctx.profile.config_folder(combinations.suite_kind(combination.suite), combination.variant)
    machine = {**environment(), "isolation": where.name}
    if isinstance(where, isolation.DockerIsolation):
        machine["image"] = where.image
    started_at = started.isoformat(timespec="seconds")
    said = {**trigger, "sha": commit} if commit else dict(trigger)
    record = RunRecord(run_id, started_at, said, machine, ctx.profile.name, skipped_variants=list(skipped))
    return record, run_dir, planned


def dispatched(combination: Combination, commit: str) -> str:
    """What the combination's core and suite are to the dispatched `commit`, in one sentence for the verdict."""
    suite = combination.suite
    checkout = Path(suite.name) if suite.name != "embedded" and suite.version != "tree" else None
    _state, said = ancestry.relation(combination.core.git, commit, checkout)
    if suite.sha == commit:
        return f"{said}; the suite was taken at it"
    where = "the embedded tree" if suite.name == "embedded" else f"the checkout at {suite.version}"
    return f"{said}; the suite is {where}, not upstream's at it"


def seed_durations(ctx: Context) -> None:
    """An empty cache starts from the durations store ci.yaml names (committed with the repository, as pytest-split's
    `.test_durations` is), so a first run's shard plan and time left come from measured times, not a constant."""
    if ctx.config.durations and not ctx.durations.exists():
        seed = ctx.repo / ctx.config.durations
        if not seed.is_file():
            raise CIConfigError(f"{ctx.config.source}: durations: {seed} does not exist")
        ctx.durations.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(seed, ctx.durations)


def _fetch_core(ctx: Context, name: str, cache: Path, commit: str) -> Candidate:
    """The core candidate, saying so first: the first fetch of a CUDA build brings about 3 GB of dependencies; a
    core that is no release comes from its source (a nightly, a wheel, a build) for the dispatched `commit`."""
    source = ctx.config.core_source(name)
    if source is not None:
        ctx.progress.phase("setup", f"core {name}: {source.kind} {source.spec}")
        coresource.obtain(source, cache, commit, lambda line: ctx.progress.phase("setup", line))
    elif cores.fetched(name, cache) is None:
        ctx.progress.phase("setup", f"fetching torch=={name} and its dependencies (once)")
    return combinations.core(name, cache)


def core_wheel(ctx: Context, core: Candidate) -> Path:
    """The core's wheel on this machine: a release fetched by its version; a named source's obtained again where
    this machine lacks it (a leg of a distributed run), and refused unless it is the wheel the run planned with."""
    source = ctx.config.core_source(core.name)
    if source is None:
        return cores.torch_wheel(core.name, ctx.cache)
    if cores.fetched(core.name, ctx.cache) is None:
        coresource.obtain(source, ctx.cache, ctx.commit or core.git, lambda line: ctx.progress.phase("setup", line))
    wheel = cores.torch_wheel(core.name, ctx.cache)
    if core.sha and cores.wheel_sha256(wheel) != core.sha:
        raise cores.CoreError(f"core {core.name}: {wheel.name} here is not the wheel the run planned with "
                              f"(sha256 {core.sha[:12]}; its source resolves to another now)")  # fmt: skip
    return wheel


def conclude(ctx: Context, record: RunRecord, run_dir: Path) -> None:
    """Once every combination has its result: upstream failures from the core matrix, attribution of the primary
    combination's failures, regressions against each combination's last green run, the verdict, the record, the
    history and the report."""
    _upstream_from_core_matrix(record.combinations)
    for result in record.combinations:
        if result.combination.matrix == "primary":
            try:
                attribute_failures(ctx, result, run_dir / "attribution")
            except COMBINATION_ERRORS as exc:  # the failures stay unattributed; the run still concludes
                ctx.progress.note(f"{result.combination.name}: attribution not done: {error_reason(exc)}")
                result.reason = result.reason or f"attribution not done: {error_reason(exc)}"
    previous = {
        r.combination.name: green[2]
        for r in record.combinations
        if (green := history.last_green(ctx.history, r.combination.name, scope=ctx.scope(r.combination)))
    }
    for result in record.combinations:
        name = result.combination.name
        last = history.last_outcomes(ctx.history, name, scope=ctx.scope(result.combination))
        result.regressions, result.fixes = report.regressions_and_fixes(result, previous.get(name), last)
    record.verdict = _verdict(record.combinations)
    record.finished = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    record.artifacts = _artifacts(run_dir, record.combinations)
    (run_dir / "record.json").write_text(json.dumps(to_json(record), indent=1, sort_keys=True) + "\n")
    try:
        history.record_run(ctx.history, record, run_dir)
    except history.HistoryError as exc:  # the record and the report still stand; the next run compares with less
        ctx.progress.note(f"run not added to the history: {exc}")
    reuse.remember_results(ctx.cache, record.run_id, record.combinations)
    report.write_report(record, run_dir, previous)


def environment() -> dict[str, object]:
    """Where the job ran: enough to tell two runs' machines apart."""
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }


def run_prepared(ctx: Context, prepared: Prepared, workdir: Path) -> CombinationResult:
    """One prepared job of the matrix, every shard on this machine."""
    name = prepared.combination.name
    suite = combination_suite(ctx, prepared)
    selected = runner.Collected(prepared.modes, []).selected
    ctx.progress.phase(name, f"running {len(selected)} tests in {len(prepared.shard_indexes())} shards")
    ran, tests = execute(ctx, prepared, suite, workdir)
    return finish(ctx, prepared, suite, ran, tests, workdir)


def outcome_line(result: CombinationResult) -> str:
    """How a combination ended, in one line for the progress display."""
    counts = ", ".join(f"{n} {outcome}" for outcome, n in result.counts().items())
    cached = f" (cached: run {result.cached})" if result.cached else ""
    reason = f": {result.reason}" if result.reason else ""
    return f"{result.status}{reason}{cached}" + (f"; {counts}" if counts else "")


def prepare(ctx: Context, combination: Combination, workdir: Path) -> Prepared | CombinationResult:
    """Check out, build once, make the environment, collect and plan; or the result that ends the combination
    here (incompatible, build_failed, error)."""
    name = combination.name
    workdir.mkdir(parents=True, exist_ok=True)
    ctx.progress.phase(name, "checking out")
    checkout = worktrees.checkout(ctx.backend_repo, combination.backend.sha, ctx.cache)
    fits, declared = compat.admits(checkout, combination.core.version, ctx.profile.origin.build)
    if not fits:
        reason = f"the backend declares torch {declared}; this core is {combination.core.version}"
        return CombinationResult(combination, "incompatible", reason=reason)
    wheel = core_wheel(ctx, combination.core)
    ctx.progress.phase(name, "building")
    say = functools.partial(ctx.progress.phase, name)
    built = backendbuild.build_for(ctx.profile, ctx.repo, checkout, wheel, ctx.cache, say)
    if not built.ok:
        moved, basis = attribute_build_failure(ctx, checkout, combination)
        return CombinationResult(combination, "build_failed", built, reason=built.first_error, attributed_to=moved,
                                 attribution_basis=basis)  # fmt: skip
    parts = combination_inputs(ctx, combination, built, wheel)
    inputs = reuse.key(parts)
    if ctx.reuse and (hit := reuse.cached_result(ctx.cache, inputs, combination)) is not None:
        hit.inputs = inputs
        return hit
    ctx.progress.phase(name, "preparing the environment")
    suite = suite_of_build(ctx, combination, built)
    try:
        collected = _collect(ctx, name, suite, reuse.key(parts, with_limits=False), workdir)
        job = ctx.durations_job(combination)
        with ctx.durations_lock:
            plan = runner.plan_shards(suite, collected.selected, ctx.durations, job, name, planning_of(ctx.config),
                                      workdir)  # fmt: skip
    except runner.RunnerError as exc:
        return CombinationResult(combination, "error", built, reason=str(exc), inputs=inputs)
    profile = home_of(ctx, combination).profile.source
    pinning.pin(workdir, suite, profile, parts, limits_of(ctx.config), set(built.wheels), ctx.cache)
    return Prepared(combination, built, collected.modes, plan, inputs)


def _collect(ctx: Context, name: str, suite: runner.Suite, key: str, workdir: Path) -> runner.Collected:
    """The suite's cases and modes: a stored collection of the same inputs (a rerun of a red combination, say),
    else a collect-only run, stored for the next."""
    stored = reuse.cached_collection(ctx.cache, key) if ctx.reuse else None
    if stored is not None:
        ctx.progress.phase(name, "collection reused (same inputs)")
        shutil.copyfile(stored, workdir / runner.COLLECTED)  # the run directory holds what it ran, as always
        return runner.collected_from(workdir / runner.COLLECTED)
    ctx.progress.phase(name, "collecting")
    collected = runner.collect(suite, workdir)
    reuse.remember_collection(ctx.cache, key, workdir / runner.COLLECTED)
    return collected


@dataclass(frozen=True)
class Home:
    """Where a combination's backend keeps what runs its tests: the device profile, the config folders and the
    backend modules (the profile's paths are relative to `root`)."""

    root: Path
    profile: DeviceProfile

    def configs(self, combination: Combination) -> Path:
        kind = combinations.suite_kind(combination.suite)
        return self.root / self.profile.config_folder(kind, combination.variant)

    def pythonpath(self) -> list[Path]:
        return [self.root / p for p in self.profile.pythonpath]


def home_of(ctx: Context, combination: Combination) -> Home:
    """HEAD's backend runs from the repository itself (local edits to configs included) with this run's profile. An
    older ref (the backend matrix, a probe pinned back) runs from its own checkout with its own profile of this
    device, so it is tested with the configs and modules it shipped with, not HEAD's; a ref that has no profile of
    this device runs with this run's profile, from HEAD's folders."""
    if combination.backend.sha == backendsource.latest(ctx.profile.origin, ctx.backend_repo):
        return Home(ctx.repo, ctx.profile)
    root = worktrees.checkout(ctx.backend_repo, combination.backend.sha, ctx.cache)
    if not (root / "configs" / "devices" / f"{ctx.profile.name}.yaml").is_file():
        return Home(ctx.repo, ctx.profile)
    return Home(root, load_profile(root / "configs", ctx.profile.name))


def combination_inputs(ctx: Context, combination: Combination, built: BuildResult, torch_wheel: Path) -> dict:
    """The combination's inputs by hash (crcr.ci.reuse): what must be equal for a recorded result to stand."""
    home = home_of(ctx, combination)
    limits = {**dataclasses.asdict(limits_of(ctx.config)), "isolation": ctx.config.isolation}
    del limits["parallel"]  # how many shards run at once changes no outcome
    if ctx.config.isolation == "docker":
        limits["image"] = ctx.config.image
    limits["environment"] = shardenv.matching(os.environ, home.profile.environment)  # what the profile passes on
    return reuse.inputs(
        combination, built, cores.wheel_sha256(torch_wheel), home.configs(combination), home.profile.source,
        home.pythonpath(), limits,
    )  # fmt: skip


def combination_suite(ctx: Context, prepared: Prepared) -> runner.Suite:
    """The prepared combination's suite in its environment (made from the recorded wheels when missing)."""
    return suite_of_build(ctx, prepared.combination, prepared.build)


def suite_of_build(ctx: Context, combination: Combination, built: BuildResult) -> runner.Suite:
    """The combination's suite in the environment of `built`'s wheels and its core's torch (reused when it exists)."""
    wheel = core_wheel(ctx, combination.core)
    wanted = list(home_of(ctx, combination).profile.requirements)
    return suite_for(ctx, combination, envs.environment(built, wheel, wanted, ctx.cache, excludes=ctx.profile.excludes))


def execute(
    ctx: Context, prepared: Prepared, suite: runner.Suite, workdir: Path, shard: int | None = None
) -> tuple[list[ShardResult], list[TestOutcome]]:
    """Run the plan's shards (or only `shard`, as one leg of a distributed run) with their retries."""
    name = prepared.combination.name
    collected = runner.Collected(dict(prepared.modes), [])
    plan = prepared.plan
    if shard is not None:
        collected, plan = runner.shard_subset(collected, plan, shard)
    return runner.run_suite(
        suite, collected, plan, limits_of(ctx.config), workdir,
        progress=lambda done, total, eta: ctx.progress.tests(name, done, total, eta), shard_env=ctx.shard_env,
    )  # fmt: skip


def finish(
    ctx: Context,
    prepared: Prepared,
    suite: runner.Suite,
    shards: list[ShardResult],
    tests: list[TestOutcome],
    workdir: Path,
) -> CombinationResult:
    """Fold the durations into the store, classify every failure from what moved since the last green run."""
    combination = prepared.combination
    results = [workdir / f"shard-{s.index}" / "results.jsonl" for s in shards]
    try:
        with ctx.durations_lock:
            job = ctx.durations_job(combination)
            runner.merge_durations(suite, ctx.durations, job, combination.name, results, workdir)
        unmerged = ""
    except runner.RunnerError as exc:  # the results stand; the combination says the store did not take them
        unmerged = f"durations: {exc}"
    last = history.last_green(ctx.history, combination.name, scope=ctx.scope(combination))
    moved = moved_since(combination, last[1] if last else None)
    for test in tests:
        if test.failing or test.flaky:
            test.classification = classify(test, moved, device=ctx.profile.failures)
    status = "error" if unmerged else "failed" if any(t.failing for t in tests) else "passed"
    seconds = sum(s.seconds for s in shards)
    result = CombinationResult(combination, status, prepared.build, reason=unmerged, shards=shards, tests=tests,
                               seconds=round(seconds, 3), inputs=prepared.inputs)  # fmt: skip
    (workdir / "plan.json").write_text(json.dumps(prepared.plan, indent=1, sort_keys=True) + "\n")
    return result


def planning_of(config: CIConfig) -> runner.Planning:
    return runner.Planning(config.shards, config.shard_cap, config.shard_setup, config.shard_groups)


def limits_of(config: CIConfig) -> runner.Limits:
    return runner.Limits(
        parallel=config.parallel_shards, workers=config.workers_per_shard,
        retries=config.retries, test_timeout=config.test_timeout, shard_timeout=config.shard_timeout,
    )  # fmt: skip


def suite_for(ctx: Context, combination: Combination, python: Path) -> runner.Suite:
    """How the plugin runs this combination's suite on the profile's device, in the environment of `python`, with
    the profile's config folder for the suite (its variant's, for a variant combination)."""
    root = suite_root(ctx, combination.suite)
    home = home_of(ctx, combination)
    paths = home.pythonpath()
    env = {"PYTHONPATH": os.pathsep.join(map(str, paths))} if paths else {}
    where = isolation.isolation(ctx.config.isolation, ctx.config.image)
    if where.name == "process":  # a compiled run's kernels, kept with the cache (a container keeps its own)
        env["TORCHINDUCTOR_CACHE_DIR"] = str(ctx.cache / INDUCTOR_CACHE)
    reads = (*paths, isolation.interpreter_prefix(python)) if where.name == "docker" else tuple(paths)
    profile = home.profile
    return runner.Suite(
        python, home.configs(combination), root, profile.device, profile.backend, env, where, reads, profile.environment
    )


def suite_root(ctx: Context, suite: Candidate) -> Path:
    """The suite tree at the candidate's commit: the embedded tree of this repository's commit, or a PyTorch
    checkout (itself when at that commit or not a git checkout, else a worktree of the commit)."""
    if suite.name == "embedded":
        return worktrees.checkout(ctx.repo, suite.version, ctx.cache) / combinations.EMBEDDED_TREE
    root = Path(suite.name)
    if suite.version != "tree" and _git_head(root) != suite.sha:
        root = worktrees.checkout(root, suite.sha, ctx.cache)
    return root


def _git_head(root: Path) -> str:
    head = root / ".git"
    if not head.exists():
        return ""
    return worktrees.resolve_ref(root, "HEAD")


def attribute_build_failure(ctx: Context, checkout: Path, combination: Combination) -> tuple[str, str]:
    """Who broke the build, and what that rests on: the same backend built against the oldest configured core. If
    that builds, the core moved; if it fails to compile too, the backend did. Without such a probe (the oldest core
    is this one, the backend excludes it, or the probe could not be set up) nobody is blamed: ("", why)."""
    oldest = ctx.config.cores[0]
    if oldest == combination.core.name:
        return "", f"unattributed: no older core to build against (torch {oldest} is this combination's own)"
    fits, declared = compat.admits(checkout, oldest, ctx.profile.origin.build)
    if not fits:
        return "", f"unattributed: the backend declares torch {declared}, so it cannot be built against {oldest}"
    ctx.progress.phase(combination.name, f"build failed; building against torch {oldest} to tell who moved")
    try:
        wheel = cores.torch_wheel(oldest, ctx.cache)
        say = functools.partial(ctx.progress.phase, combination.name)
        probe = backendbuild.build_for(ctx.profile, ctx.repo, checkout, wheel, ctx.cache, say)
    except COMBINATION_ERRORS as exc:  # the probe's own machine failed: no evidence either way
        return "", f"unattributed: the probe build against torch {oldest} could not run ({error_reason(exc)})"
    if probe.ok:
        return "core", f"probe: the same backend builds against torch {oldest}"
    return "backend", f"probe: the same backend fails to build against torch {oldest} too ({probe.first_error})"


def attribute_failures(
    ctx: Context,
    result: CombinationResult,
    workdir: Path,
    suite_of: Callable[[Combination], runner.Suite | None] | None = None,
) -> None:
    """When more than one candidate moved since the last green run, rerun the failures with each moved candidate
    pinned back (`suite_of` sets a probe up; by default it is built like any combination, None if it cannot be),
    and record which candidate each failure follows."""
    failing = [t.nodeid for t in result.tests if t.failing]
    last = history.last_green(ctx.history, result.combination.name, scope=ctx.scope(result.combination))
    if not failing or last is None:
        return
    probes = attribution.plan_attribution(result.combination, last[1], failing)
    if not probes:
        return
    passing: dict[str, set[str]] = {}  # only the probes that ran
    pinned: dict[str, str] = {}
    missing: list[str] = []  # probes that could not be set up, and why
    for probe in probes:
        ctx.progress.phase(result.combination.name, f"attributing: {probe.name}")
        pinned[probe.name] = attribution.pinned_kind(probe)
        try:
            suite = (suite_of or (lambda c: built_suite(ctx, c)))(probe)
        except COMBINATION_ERRORS as exc:
            missing.append(f"{probe.name} ({error_reason(exc)})")
            continue
        if suite is None:
            missing.append(f"{probe.name} (its build failed)")
            continue
        passing[probe.name] = _passing(ctx, suite, failing, workdir / safe_name(probe.name))
    follows = attribution.attribute(failing, passing, pinned)
    moved = moved_since(result.combination, last[1])
    basis = (
        "probes run: "
        + (", ".join(sorted(passing)) or "none")
        + ("; not run: " + ", ".join(missing) if missing else "")
    )
    for test in result.tests:
        if follows.get(test.nodeid):  # an inconclusive probe says nothing new: what was found before stands
            test.follows = follows[test.nodeid]
            test.classification = classify(test, moved, probes=basis, device=ctx.profile.failures)


def built_suite(ctx: Context, combination: Combination) -> runner.Suite | None:
    """A combination's backend built against its core, in its environment; None when the build fails."""
    checkout = worktrees.checkout(ctx.backend_repo, combination.backend.sha, ctx.cache)
    wheel = core_wheel(ctx, combination.core)
    built = backendbuild.build_for(ctx.profile, ctx.repo, checkout, wheel, ctx.cache)
    return suite_of_build(ctx, combination, built) if built.ok else None


def _passing(ctx: Context, suite: runner.Suite, nodeids: list[str], workdir: Path) -> set[str]:
    """The given tests that pass in a probe's suite: passed, nothing else (a test skipped, xfailed or deselected
    there did not run, so it is no evidence that the pinned candidate makes it pass)."""
    workdir.mkdir(parents=True, exist_ok=True)
    run = runner.run_shard(suite, 1, nodeids, nodeids, limits_of(ctx.config), workdir)
    return {n for n, r in run.records.items() if r.get("outcome") == "passed"}


def _upstream_from_core_matrix(results: list[CombinationResult]) -> None:
    """A failure on the newer torch and not the older, with the same backend, suite and variant, is upstream's."""
    upstream = attribution.core_matrix_upstream(results)
    for result in results:
        found = upstream.get(result.combination.name, set()) if result.combination.matrix == "primary" else set()
        for test in result.tests:
            if test.failing and test.nodeid in found:
                test.follows = "core"
                test.classification = dataclasses.replace(
                    test.classification or classify(test, {"core"}, ""),
                    klass="upstream",
                    reason="it fails with the newer torch and passes with the older one, same backend and suite",
                )


def _verdict(results: list[CombinationResult]) -> str:
    """Red when HEAD fails against any core; older backend refs are shown, not judged (their code is history)."""
    judged = [r for r in results if r.combination.matrix != "backend"]
    bad = [r for r in judged if r.status not in ("passed", "incompatible")]
    older = [r for r in results if r.combination.matrix == "backend" and r.status != "passed"]
    shown = "; older refs: " + ", ".join(f"{r.combination.name} {r.status}" for r in older) if older else ""
    if not bad:
        return "green" + (f" ({shown.removeprefix('; ')})" if shown else "")
    classes = [t.classification for r in judged for t in r.tests if t.failing and t.classification]
    worst = verdict(classes) if classes else ""
    names = ", ".join(f"{r.combination.name} {r.status}" + _why(r) for r in bad)
    return f"red: {names}" + (f" (worst failure class: {worst})" if worst else "") + shown


def _why(result: CombinationResult) -> str:
    """An errored combination's reason, in brief, for the verdict line (the others say it with their tests)."""
    return f" ({result.reason[:160]})" if result.status == "error" and result.reason else ""


def _artifacts(run_dir: Path, results: list[CombinationResult]) -> list[Artifact]:
    found = []
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".xml")):
        found.append(Artifact(path.relative_to(run_dir).as_posix(), file_sha256(path)))
    for result in results:
        if result.build is not None:
            for wheel, digest in sorted(result.build.wheel_sha256.items()):
                found.append(Artifact(Path(result.build.wheels.get(wheel, wheel)).name, digest))
    return found


def safe_name(name: str) -> str:
    """A combination's name as a directory name."""
    return "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name)
