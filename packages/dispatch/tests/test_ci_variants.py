"""Variants: more config folders of a device profile (a compiled run, say) that run the same backend x core x suite
as combinations of their own. Profiles and ci.yaml declare them with one-line errors; a variant ci.yaml asks for
that the selected profile does not declare is skipped for that device, with a note; the plan gives the latest
backend's combinations a variant each, with stable names. (A real run of a variant: tests/test_ci_fallback_run.py.)"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from crcr.ci import combinations, history, pipeline, report
from crcr.ci.backendsource import BackendSource
from crcr.ci.ciconfig import CIConfig, CIConfigError, DeviceProfile, load_ci_config, load_profile, split_variants
from crcr.ci.model import Candidate, RunRecord, from_json, to_json

REPO = Path(__file__).resolve().parents[3]
CI = "device: dev\ncore: {versions: ['2.13.0', '2.14.1']}\n"
PROFILE = "device: dev\nconfigs: {embedded: configs/dev, upstream: configs/dev-upstream}\n"
COMPILE = "variants:\n  compile: {embedded: configs/dev-compile}\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "commit", "-q", "-m", message)


def profile_dir(tmp_path: Path, text: str) -> Path:
    """A configs folder holding `devices/dev.yaml` with `text`."""
    (tmp_path / "devices").mkdir(exist_ok=True)
    (tmp_path / "devices" / "dev.yaml").write_text(text)
    return tmp_path


def fake_core(version: str, cache: Path) -> Candidate:
    """A core candidate without fetching torch: planning only needs its name and sha."""
    return Candidate("core", version, version, f"wheel-{version}")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A backend repository with an older tag `old` and a newer HEAD, its embedded tree holding one test file."""
    repo = tmp_path / "backend"
    tree = repo / combinations.EMBEDDED_TREE / "test"
    tree.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (tree / "test_a.py").write_text("def test_a():\n    pass\n")
    commit(repo, "old")
    git(repo, "tag", "old")
    (tree / "test_a.py").write_text("def test_a():\n    assert True\n")
    commit(repo, "new")
    monkeypatch.setattr(combinations, "core", fake_core)
    return repo


# --- declaring variants ---------------------------------------------------------------------------------------------


def test_a_profile_maps_each_variant_to_its_config_folders(tmp_path: Path) -> None:
    profile = load_profile(profile_dir(tmp_path, PROFILE + COMPILE), "dev")
    assert profile.variants == {"compile": {"embedded": "configs/dev-compile"}}
    assert profile.config_folder("embedded", "compile") == "configs/dev-compile"
    assert profile.config_folder("embedded") == "configs/dev"
    with pytest.raises(CIConfigError, match=r"dev\.yaml: variants\.other: not declared \(its variants: compile\)$"):
        profile.config_folder("embedded", "other")  # a recorded run reproduced after its variant went
    assert load_profile(profile_dir(tmp_path, PROFILE), "dev").variants == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("variants: [compile]\n", "variants: expected a mapping"),
        ("variants: {compile: configs/x}\n", "variants.compile: expected a mapping (embedded/upstream: FOLDER)"),
        ("variants: {compile: {}}\n", "variants.compile: required (embedded and/or upstream config folders)"),
        ("variants: {compile: {eager: x}}\n", "variants.compile.eager: expected embedded/upstream: FOLDER"),
        ("variants: {compile: {embedded: ''}}\n", "variants.compile.embedded: expected embedded/upstream: FOLDER"),
        ("variants: {compile: {embedded: [x]}}\n", "variants.compile.embedded: expected embedded/upstream: FOLDER"),
        ("variants: {Compile+x: {embedded: x}}\n", "variants.Compile+x: a variant's name is lower-case letters"),
        ("variants: {1: {embedded: x}}\n", "variants.1: a variant's name is lower-case letters"),
        ("variants: {a: {embedded: x}, a: {embedded: y}}\n", "duplicate key 'a'"),
    ],
)
def test_a_bad_variant_is_one_line_naming_the_field(tmp_path: Path, text: str, message: str) -> None:
    configs = profile_dir(tmp_path, PROFILE + text)
    with pytest.raises(CIConfigError) as info:
        load_profile(configs, "dev")
    assert str(info.value).startswith(f"{configs / 'devices' / 'dev.yaml'}:")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_variant_error_names_the_line_of_the_field(tmp_path: Path) -> None:
    configs = profile_dir(tmp_path, PROFILE + "variants:\n  compile:\n    embedded: x\n    eager: y\n")
    with pytest.raises(CIConfigError, match=r"dev\.yaml:6: variants\.compile\.eager: expected embedded/upstream"):
        load_profile(configs, "dev")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("variants: compile\n", "variants: expected a list of strings"),
        ("variants: [compile, compile]\n", "variants[1]: 'compile' is listed twice"),
        ("variants: ['']\n", "variants[0]: expected a non-empty string"),
    ],
)
def test_a_bad_ci_variants_list_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "ci.yaml"
    path.write_text(CI + text)
    with pytest.raises(CIConfigError) as info:
        load_ci_config(path)
    assert str(info.value).startswith(f"{path}:3: {message}")
    assert "\n" not in str(info.value)


def test_ci_yaml_s_variants_split_into_the_profile_s_and_the_skipped(tmp_path: Path) -> None:
    path = tmp_path / "ci.yaml"
    path.write_text(CI + "variants:\n  - other\n  - compile\n")
    config = load_ci_config(path)
    assert config.variants == ("other", "compile")
    assert split_variants(config, load_profile(profile_dir(tmp_path, PROFILE + COMPILE), "dev")) == (
        ("compile",),
        ("other",),
    )
    assert split_variants(config, load_profile(profile_dir(tmp_path, PROFILE), "dev")) == ((), ("other", "compile"))
    path.write_text(CI)
    assert split_variants(load_ci_config(path), load_profile(tmp_path, "dev")) == ((), ())  # none asked for


@pytest.mark.skipif(not (REPO / "configs" / "ci.yaml").exists(), reason="run from the repository")
def test_every_shipped_profile_runs_the_shipped_ci_yaml() -> None:
    """`nox -s ci -- --device NAME` for each profile: its own device runs every variant, another skips those it
    does not declare, and each one it runs has a folder for the shipped suite (else the run stops before a build)."""
    config = load_ci_config(REPO / "configs" / "ci.yaml")
    kind = "embedded" if config.suite == "embedded" else "upstream"
    assert split_variants(config, load_profile(REPO / "configs", config.device)) == (config.variants, ())
    for name in sorted(p.stem for p in (REPO / "configs" / "devices").glob("*.yaml")):
        profile = load_profile(REPO / "configs", name)
        variants, skipped = split_variants(config, profile)
        assert set(skipped).isdisjoint(profile.variants)
        for variant in ("", *variants):
            profile.config_folder(kind, variant)  # raises CIConfigError without one


class NoteProgress(pipeline.QuietProgress):
    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)


@pytest.mark.parametrize(
    ("asked", "planned", "skipped"),
    [
        (("compile",), ["primary", "core@2.13.0"], ["compile"]),
        (("other", "compile"), ["primary", "core@2.13.0", "primary+compile", "core@2.13.0+compile"], ["other"]),
    ],
)
def test_a_variant_the_device_profile_does_not_declare_is_skipped_with_a_note(
    repo: Path, tmp_path: Path, asked: tuple[str, ...], planned: list[str], skipped: list[str]
) -> None:
    ctx = _context(repo, tmp_path / "cache")
    ctx.config = CIConfig("dev", ("2.13.0", "2.14.1"), "embedded", variants=asked)
    if "other" not in asked:
        ctx.profile = DeviceProfile("dev", "dev", (), {"embedded": "configs/dev"}, source=Path("devices/dev.yaml"))
    ctx.progress = progress = NoteProgress()
    record, _run_dir, plan = pipeline.start(ctx, {})
    assert [c.name for c in plan] == planned
    assert progress.notes == [f"variant {name}: not declared by device profile dev; skipped" for name in skipped]
    assert record.skipped_variants == skipped
    assert from_json(RunRecord, to_json(record)).skipped_variants == skipped  # record.json, a prepared run.json
    assert report.summarize(record, {})["skipped_variants"] == skipped
    assert "<tr><th>skipped variants</th><td>" in report.render_html(report.summarize(record, {}))
    assert not (ctx.cache / "builds").exists()


# --- planning and config folders ------------------------------------------------------------------------------------


def test_each_variant_gets_the_primary_and_core_combinations_with_stable_names(repo: Path, tmp_path: Path) -> None:
    config = CIConfig("dev", ("2.13.0", "2.14.1"), "embedded", variants=("compile",))
    older = BackendSource(refs=("old",))
    planned = combinations.plan(config, older, repo, repo, tmp_path / "cache")
    names = ["primary", "backend@old", "core@2.13.0", "primary+compile", "core@2.13.0+compile"]
    assert [c.name for c in planned] == names
    assert [c.variant for c in planned] == ["", "", "", "compile", "compile"]
    assert [c.matrix for c in planned] == ["primary", "backend", "core", "primary", "core"]
    by_name = {c.name: c for c in planned}
    for plain in ("primary", "core@2.13.0"):
        variant = by_name[f"{plain}+compile"]
        assert variant.candidates() == by_name[plain].candidates()  # the same backend x core x suite
        assert variant.backend.name == "HEAD"
    assert combinations.plan(config, older, repo, repo, tmp_path / "cache") == planned  # names and candidates: stable


def test_variants_follow_the_matrices_and_dedupe_apart_from_the_plain_ones(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    backend_only = CIConfig("dev", ("2.13.0", "2.14.1"), "embedded", matrices=("backend",), variants=("a",))
    assert [c.name for c in combinations.plan(backend_only, BackendSource(refs=("old",)), repo, repo, cache)] == [
        "primary",
        "backend@old",
        "primary+a",
    ]
    same_core = CIConfig("dev", ("2.14.1", "2.14.1"), "embedded", variants=("a", "b"))
    assert [c.name for c in combinations.plan(same_core, BackendSource(), repo, repo, cache)] == [
        "primary",
        "primary+a",
        "primary+b",
    ]


def _context(repo: Path, cache: Path, suite: str = "embedded") -> pipeline.Context:
    """Plain configs for both kinds of suite; the `compile` variant's for the embedded suite only."""
    profile = DeviceProfile(
        "dev", "dev", (), {"embedded": "configs/dev", "upstream": "configs/dev-upstream"},
        variants={"compile": {"embedded": "configs/dev-compile"}}, source=Path("devices/dev.yaml"),
    )  # fmt: skip
    config = CIConfig("dev", ("2.13.0", "2.14.1"), suite, variants=("compile",))
    return pipeline.Context(repo, cache, config, profile)


def test_a_variant_runs_the_same_suite_with_its_own_config_folder(repo: Path, tmp_path: Path) -> None:
    ctx = _context(repo, tmp_path / "cache")
    plain, variant = (
        c
        for c in combinations.plan(ctx.config, ctx.profile.origin, repo, repo, ctx.cache)
        if c.name.startswith("primary")
    )
    suites = [pipeline.suite_for(ctx, c, Path(sys.executable)) for c in (plain, variant)]
    assert [s.configs for s in suites] == [repo / "configs/dev", repo / "configs/dev-compile"]
    assert suites[0].torch_root == suites[1].torch_root
    assert (suites[0].torch_root / "test" / "test_a.py").is_file()


def test_only_selects_exactly_the_named_combination(repo: Path, tmp_path: Path) -> None:
    for only, expected in [(("primary",), ["primary"]), (("primary+compile",), ["primary+compile"])]:
        ctx = _context(repo, tmp_path / "cache")
        ctx.only = only
        assert [c.name for c in pipeline.start(ctx, {})[2]] == expected


def test_a_variant_without_a_folder_for_the_suite_stops_the_run_before_any_build(repo: Path, tmp_path: Path) -> None:
    tree = tmp_path / "pytorch"
    (tree / "test").mkdir(parents=True)
    ctx = _context(repo, tmp_path / "cache", suite=str(tree))
    with pytest.raises(CIConfigError, match=r"^devices/dev\.yaml: variants\.compile\.upstream: required: this run's"):
        pipeline.start(ctx, {})
    assert not (ctx.cache / "builds").exists()


def test_a_history_that_is_not_ours_stops_the_run_before_any_build(repo: Path, tmp_path: Path) -> None:
    ctx = _context(repo, tmp_path / "cache")
    ctx.history.parent.mkdir(parents=True)
    ctx.history.write_text("not a database")
    with pytest.raises(history.HistoryError, match=r"history\.sqlite: "):
        pipeline.start(ctx, {})
    assert not (ctx.cache / "builds").exists()
    assert not (ctx.cache / "runs").exists()


def test_a_build_failure_is_blamed_only_on_a_probe_that_ran(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a probe build against the oldest core (it is this combination's own, the backend excludes it, or
    the probe cannot be set up) nobody is blamed, and the basis says why."""
    ctx = _context(repo, tmp_path / "cache")
    plan = {c.name: c for c in combinations.plan(ctx.config, ctx.profile.origin, repo, repo, ctx.cache)}
    oldest, newest = plan["core@2.13.0"], plan["primary"]
    assert pipeline.attribute_build_failure(ctx, repo, oldest) == (
        "",
        "unattributed: no older core to build against (torch 2.13.0 is this combination's own)",
    )
    member = repo / "packages" / "dev"
    member.mkdir(parents=True)
    (member / "pyproject.toml").write_text('[project]\nname = "dev"\nversion = "1"\ndependencies = ["torch>=2.14"]\n')
    who, why = pipeline.attribute_build_failure(ctx, repo, newest)
    assert (who, why) == ("", "unattributed: the backend declares torch >=2.14, so it cannot be built against 2.13.0")
    (member / "pyproject.toml").unlink()
    ctx.config = dataclasses.replace(ctx.config, cores=("0.0.0.1", "2.14.1"))  # no such torch: the probe cannot run
    monkeypatch.setenv("TRIBUTARY_TORCH_INDEX", (tmp_path / "empty-index").as_uri())
    who, why = pipeline.attribute_build_failure(ctx, repo, newest)
    assert who == ""
    assert why.startswith("unattributed: the probe build against torch 0.0.0.1 could not run (core: ")
