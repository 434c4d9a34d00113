"""configs/ci.yaml and device profiles: the shipped ones load; every bad one is one line naming the file and field,
and `crcr ci` turns it into exit 2 without a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from crcr.ci.ciconfig import CIConfigError, load_ci_config, load_profile
from crcr.cli import main

REPO = Path(__file__).resolve().parents[3]
GOOD = "device: dev\ncore: {versions: ['2.13.0', '2.14.1']}\n"


@pytest.mark.skipif(not (REPO / "configs" / "ci.yaml").exists(), reason="run from the repository")
def test_the_shipped_config_and_profiles_load() -> None:
    config = load_ci_config(REPO / "configs" / "ci.yaml")
    assert config.cores[-1] == "2.14.1"
    for profile in sorted((REPO / "configs" / "devices").glob("*.yaml")):
        assert load_profile(REPO / "configs", profile.stem).configs


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD + "retries: -1\n", "retries: must be at least 0"),
        (GOOD + "durations: [a]\n", "durations: expected a non-empty string"),
        (GOOD + "durations: ''\n", "durations: expected a non-empty string"),
        (GOOD + "retries: true\n", "retries: expected an integer"),
        (GOOD + "shards: {count: 0}\n", "shards.count: must be at least 1"),
        (GOOD + "shards: {cuont: 2}\n", "shards.cuont: unknown field"),
        (GOOD + "shards: {count: 2, cap: 600}\n", "shards.cap: give count or cap, not both"),
        (GOOD + "shards: {cap: 0}\n", "shards.cap: must be at least 0.001"),
        (GOOD + "shards: {setup: -1}\n", "shards.setup: must be at least 0"),
        (GOOD + "shards: {groups: [slow]}\n", "shards.groups: expected a mapping"),
        (GOOD + "shards: {groups: {slow: ''}}\n", "shards.groups.slow: expected a non-empty string"),
        (GOOD + "shards: {groups: {'a=b': 'test/*'}}\n", "shards.groups.a=b: a group name is a non-empty word"),
        (GOOD + "shards: {isolation: vm}\n", "shards.isolation: 'vm' is not one of process, docker"),
        (GOOD + "shards: {isolation: docker, image: 3}\n", "shards.image: expected a non-empty string"),
        (GOOD + "timeouts: {test: 0}\n", "timeouts.test: must be at least 0.001"),
        (GOOD + "matrices: [sideways]\n", "matrices[0]: 'sideways' is not a matrix"),
        (GOOD + "backend: {refs: [main]}\n", "backend: older backend refs are the device profile's"),
        ("core: {versions: ['2.13.0']}\n", "device: required"),
        ("device: dev\ncore: {versions: []}\n", "core.versions: required"),
        (
            "device: dev\ncore: {versions: ['2.13.0', '2.13.0']}\n",
            "core.versions[1]: the core '2.13.0' is listed twice",
        ),
        ("device: dev\ncore: {versions: [[2]]}\n", "core.versions[0]: expected a torch version or a mapping"),
        ("device: dev\ncore: {versions: [{nightly: yesterday}]}\n", "core.versions[0].nightly: 'yesterday' is neither"),
        (
            "device: dev\ncore: {versions: [{nightly: 2026-02-30}]}\n",
            "core.versions[0].nightly: '2026-02-30' is neither",
        ),
        ("device: dev\ncore: {versions: [{wheel: a.whl, build: make}]}\n", "core.versions[0].build: give exactly one"),
        ("device: dev\ncore: {versions: [{name: x}]}\n", "core.versions[0].nightly: give exactly one of"),
        ("device: dev\ncore: {versions: [{wheel: a.whl, index: u}]}\n", "core.versions[0].index: only a nightly"),
        ("device: dev\ncore: {versions: [{build: make}]}\n", "core.versions[0].checkout: required"),
        ("device: dev\ncore: {versions: [{wheel: a.whl, name: ../x}]}\n", "core.versions[0].name: '../x': a core's"),
        ("device: dev\ncore: {versions: [{wheel: a.whl}, {wheel: b.whl}]}\n", "core.versions[1]: the core 'wheel' is"),
        ("device: dev\ncore: {versions: [{wheel: a.whl, colour: red}]}\n", "core.versions[0].colour: unknown field"),
        ("device: [unclosed\n", "not YAML"),
        ("- a list\n", "top level: expected a mapping"),
        (GOOD + "retries: 1\nretries: 2\n", "duplicate key 'retries' (first at line"),
    ],
)
def test_a_bad_ci_config_is_one_line_naming_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "ci.yaml"
    path.write_text(text)
    with pytest.raises(CIConfigError) as info:
        load_ci_config(path)
    assert str(info.value).startswith(f"{path}")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_core_sources_besides_releases(tmp_path: Path) -> None:
    path = tmp_path / "ci.yaml"
    path.write_text(
        "device: dev\ncore:\n  versions:\n    - '2.13.0'\n    - {nightly: 2026-11-30}\n"
        "    - {wheel: 'https://ci.example/pytorch-wheel-{sha}/torch.whl', name: ci-wheel}\n"
        "    - {build: 'pip wheel --no-build-isolation --no-deps -w {out} {source}', checkout: ~/pytorch}\n"
        "    - {nightly: dispatched, index: 'http://127.0.0.1:1/simple'}\n"
    )
    config = load_ci_config(path)
    assert config.cores == ("2.13.0", "nightly-2026-11-30", "ci-wheel", "source", "nightly")
    assert config.core_source("2.13.0") is None
    nightly = config.core_source("nightly")
    assert nightly is not None
    assert (nightly.kind, nightly.spec, nightly.index) == ("nightly", "dispatched", "http://127.0.0.1:1/simple")
    built = config.core_source("source")
    assert built is not None
    assert (built.kind, built.checkout, built.ref) == ("build", "~/pytorch", "")


def test_shards_reach_the_planner_s_cap_set_up_and_groups(tmp_path: Path) -> None:
    path = tmp_path / "ci.yaml"
    path.write_text(
        GOOD + "shards:\n  cap: 600\n  setup: 45\n  groups: {compiled: '*compile*', ops: 'test/test_ops.py'}\n"
    )
    config = load_ci_config(path)
    assert (config.shard_cap, config.shard_setup) == (600.0, 45.0)
    assert config.shard_groups == (("compiled", "*compile*"), ("ops", "test/test_ops.py"))  # in order: first wins
    path.write_text(GOOD)
    assert (load_ci_config(path).shard_cap, load_ci_config(path).shard_setup) == (None, 0.0)


def test_a_field_error_names_the_line_of_the_field(tmp_path: Path) -> None:
    path = tmp_path / "ci.yaml"
    path.write_text(GOOD + "shards:\n  count: 2\n  cuont: 3\n")
    with pytest.raises(CIConfigError) as info:
        load_ci_config(path)
    line = GOOD.count("\n") + 3  # the mistyped key's own line
    assert str(info.value).startswith(f"{path}:{line}: shards.cuont: unknown field")


def test_a_bad_profile_and_an_unknown_device_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "devices").mkdir()
    (tmp_path / "devices" / "dev.yaml").write_text("device: dev\nconfigs: {elsewhere: x}\n")
    with pytest.raises(CIConfigError, match=r"dev\.yaml:2: configs\.elsewhere: expected embedded/upstream"):
        load_profile(tmp_path, "dev")
    with pytest.raises(CIConfigError, match=r"no device profile 'other' \(profiles: dev\)"):
        load_profile(tmp_path, "other")


def test_crcr_ci_with_a_bad_config_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ci.yaml"
    path.write_bytes(b"device: caf\xe9\n")
    assert main(["ci", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {path}: not UTF-8 text\n"


def test_a_committed_durations_store_seeds_an_empty_cache_once(tmp_path: Path) -> None:
    from crcr.ci import pipeline

    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "durations.json").write_text('{"ci": {"primary": {"test/a.py::T::t": 0.25}}}\n')
    path = tmp_path / "configs" / "ci.yaml"
    path.write_text(GOOD + "durations: configs/durations.json\n")
    config = load_ci_config(path)
    ctx = pipeline.Context(tmp_path, tmp_path / "cache", config, None)  # type: ignore[arg-type]
    pipeline.seed_durations(ctx)
    assert ctx.durations.read_text() == '{"ci": {"primary": {"test/a.py::T::t": 0.25}}}\n'
    ctx.durations.write_text("{}\n")  # the cache's own store, merged since: never replaced
    pipeline.seed_durations(ctx)
    assert ctx.durations.read_text() == "{}\n"
    path.write_text(GOOD + "durations: configs/missing.json\n")
    ctx = pipeline.Context(tmp_path, tmp_path / "other", load_ci_config(path), None)  # type: ignore[arg-type]
    with pytest.raises(CIConfigError, match=r"ci\.yaml: durations: .*missing\.json does not exist$"):
        pipeline.seed_durations(ctx)


def test_a_profile_excludes_distributions_by_name_only(tmp_path: Path) -> None:
    assert load_profile(REPO / "configs", "ring").excludes == ("triton",)
    (tmp_path / "devices").mkdir()
    profile = tmp_path / "devices" / "dev.yaml"
    profile.write_text("device: dev\nconfigs: {embedded: c}\nexcludes: [triton, nvidia-nccl-cu13]\n")
    loaded = load_profile(tmp_path, "dev")
    assert (loaded.name, loaded.excludes) == ("dev", ("triton", "nvidia-nccl-cu13"))
    profile.write_text("device: dev\nconfigs: {embedded: c}\nexcludes: ['triton>=3']\n")
    with pytest.raises(CIConfigError, match=r"dev\.yaml:3: excludes\[0\]: 'triton>=3' is not a distribution name"):
        load_profile(tmp_path, "dev")


def test_a_profile_says_where_its_backend_comes_from_and_how_it_builds(tmp_path: Path) -> None:
    ring = load_profile(REPO / "configs", "ring").origin
    assert (ring.external, ring.build, ring.native, ring.refs) == (False, "workspace", True, ("5c6ac3d", "27693a2"))
    (tmp_path / "devices").mkdir()
    profile = tmp_path / "devices" / "dev.yaml"
    profile.write_text(
        "device: dev\nconfigs: {upstream: c}\nsource:\n  repo: https://example.org/dev.git\n  ref: main\n"
        "  refs: [v1]\n  build: package\n  distributions: [torch-dev]\n  native: false\n"
    )
    origin = load_profile(tmp_path, "dev").origin
    assert (origin.repo, origin.ref, origin.refs, origin.build) == (
        "https://example.org/dev.git",
        "main",
        ("v1",),
        "package",
    )
    assert (origin.distributions, origin.native, origin.external) == (("torch-dev",), False, True)
    for text, message in (
        ("source: {build: cmake}", r"dev\.yaml:3: source\.build: 'cmake' is not one of workspace, package"),
        ("source: {native: yes please}", r"dev\.yaml:3: source\.native: expected true or false"),
        ("source: {distributions: ['torch-dev>=1']}", r"source\.distributions\[0\]: 'torch-dev>=1' is not a dis"),
        ("source: {repository: x}", r"dev\.yaml:3: source\.repository: unknown field"),
        ("source: {repo: ''}", r"source\.repo: expected a non-empty string"),
        ("source: [x]", r"dev\.yaml:3: source: expected a mapping"),
    ):
        profile.write_text(f"device: dev\nconfigs: {{upstream: c}}\n{text}\n")
        with pytest.raises(CIConfigError, match=message):
            load_profile(tmp_path, "dev")


def test_a_profile_says_how_its_devices_failures_read(tmp_path: Path) -> None:
    ring = load_profile(REPO / "configs", "ring")
    assert (ring.failures.transient, ring.failures.refusal) == (("TransientDeviceError",), ("TooLargeError",))
    (tmp_path / "devices").mkdir()
    profile = tmp_path / "devices" / "dev.yaml"
    profile.write_text("device: dev\nconfigs: {embedded: c}\nfailures:\n  refusal: ['Too(Large']\n")
    with pytest.raises(CIConfigError, match=r"dev\.yaml:4: failures\.refusal\[0\]: not a regular expression"):
        load_profile(tmp_path, "dev")
    profile.write_text("device: dev\nconfigs: {embedded: c}\nfailures: {fatal: [x]}\n")
    with pytest.raises(CIConfigError, match=r"failures\.fatal: unknown field \(known: refusal, transient\)"):
        load_profile(tmp_path, "dev")
