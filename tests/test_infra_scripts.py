"""The container tooling under infra/: pip-configuration discovery against a real pip, and bad command lines."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
INFRA = ROOT / "infra"


def _load_pip_context():
    spec = importlib.util.spec_from_file_location("pip_context", INFRA / "pip_context.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


pc = _load_pip_context()
HOME_IN = Path("/home/runner")
PREFIX_IN = Path("/opt/python")


@pytest.fixture(scope="module")
def pip_python() -> str:
    """An interpreter with pip: this one, or the base interpreter a pip-less venv was made from."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, str(Path(sys.base_prefix) / "bin" / version)):
        if subprocess.run([candidate, "-c", "import pip"], capture_output=True, check=False).returncode == 0:
            return candidate
    pytest.skip("no interpreter with pip to ask for its configuration")


def _write_user_config(home: Path, body: str) -> Path:
    path = home / ".config" / "pip" / "pip.conf"
    path.parent.mkdir(parents=True)
    path.write_text(body)
    return path


@pytest.fixture
def fake_host(tmp_path: Path) -> dict[str, str]:
    """A host whose PIP_CONFIG_FILE names wheel folders, indexes and constraints, with PIP_* and a CA variable."""
    for folder in ("wheels", "more-wheels", "user-wheels", "idx/simple", "idx/files"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "ca.pem").write_text("not a real bundle\n")
    (tmp_path / "wheels" / "constraints.txt").write_text("torch<=2.14.1\n")
    (tmp_path / "pins.txt").write_text("numpy<3\n")
    env_conf = tmp_path / "env.conf"
    env_conf.write_text(
        f"[global]\nfind-links = {tmp_path}/wheels\n"
        f"extra-index-url = file://{tmp_path}/idx/simple file://{tmp_path}/gone/simple https://example.invalid/simple\n"
        f"[install]\nconstraint = {tmp_path}/wheels/constraints.txt\ncert = relative/ca.pem\n"
    )
    home = tmp_path / "home"
    _write_user_config(home, f"[global]\nfind-links = {tmp_path}/user-wheels\n")
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CONFIG_DIRS": str(tmp_path / "xdg"),
        "PIP_CONFIG_FILE": str(env_conf),
        "PIP_FIND_LINKS": f"{tmp_path}/more-wheels",
        "PIP_CONSTRAINT": f"{tmp_path}/pins.txt",
        "SSL_CERT_FILE": str(tmp_path / "ca.pem"),
        "UNRELATED": "1",
    }


def test_discovers_what_pip_reads_and_the_paths_it_names(pip_python: str, fake_host: dict[str, str]) -> None:
    files = pc.read_config_files([pip_python, "-m", "pip"], fake_host)
    context = pc.pip_context(files, fake_host, HOME_IN, PREFIX_IN)
    tmp = Path(fake_host["PIP_CONFIG_FILE"]).parent
    mounts = {m.target: m.source for m in context.mounts}
    for name in ["env.conf", "wheels", "more-wheels", "idx", "pins.txt", "ca.pem"]:
        assert mounts[tmp / name] == tmp / name, name
    assert not any(t.is_relative_to(tmp / "gone") for t in mounts), "a missing index is not mounted"
    assert tmp / "wheels" / "constraints.txt" not in mounts, "already visible through the wheels folder"
    # pip skips the user config file when PIP_CONFIG_FILE exists, so the container must not see it either.
    assert HOME_IN / ".config" / "pip" / "pip.conf" not in mounts
    assert tmp / "user-wheels" not in mounts
    assert all(m.source.exists() for m in context.mounts)
    env = dict(context.env)
    for name in ("PIP_FIND_LINKS", "PIP_CONFIG_FILE", "PIP_CONSTRAINT", "SSL_CERT_FILE"):
        assert env[name] == fake_host[name]
    assert "UNRELATED" not in env
    assert "HOME" not in env


def test_user_config_lands_in_the_container_home(pip_python: str, tmp_path: Path) -> None:
    (tmp_path / "wheels").mkdir()
    home = tmp_path / "home"
    user_conf = _write_user_config(home, f"[global]\nfind-links = {tmp_path}/wheels\n")
    host = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CONFIG_DIRS": str(tmp_path / "xdg")}
    files = pc.read_config_files([pip_python, "-m", "pip"], host)
    mounts = {m.target: m.source for m in pc.pip_context(files, host, HOME_IN, PREFIX_IN).mounts}
    assert mounts[HOME_IN / ".config" / "pip" / "pip.conf"] == user_conf
    assert mounts[tmp_path / "wheels"] == tmp_path / "wheels"


def test_site_and_user_files_land_where_the_container_pip_looks(tmp_path: Path) -> None:
    site = tmp_path / "prefix" / "pip.conf"
    outside_home = tmp_path / "xdg-elsewhere" / "pip" / "pip.conf"
    for path in (site, outside_home):
        path.parent.mkdir(parents=True)
        path.write_text("[global]\ntimeout = 60\n")
    files = [
        pc.ConfigFile("site", site, True),
        pc.ConfigFile("user", outside_home, True),
        pc.ConfigFile("global", tmp_path / "absent.conf", False),
    ]
    context = pc.pip_context(files, {"HOME": str(tmp_path / "home")}, HOME_IN, PREFIX_IN)
    assert {m.target: m.source for m in context.mounts} == {
        PREFIX_IN / "pip.conf": site,
        HOME_IN / ".config" / "pip" / "pip.conf": outside_home,
    }


def test_parses_pip_config_debug_output() -> None:
    text = (
        "env_var:\n  PIP_FIND_LINKS='/w'\nenv:\n  /e.conf, exists: False\nglobal:\n"
        "  /etc/xdg/pip/pip.conf, exists: True\n    global.cert: /c.pem\n  /etc/pip.conf, exists: True\n"
        "site:\n  /venv/pip.conf, exists: False\nuser:\n  /root/.config/pip/pip.conf, exists: True\n"
    )
    assert pc.parse_config_debug(text) == [
        pc.ConfigFile("env", Path("/e.conf"), False),
        pc.ConfigFile("global", Path("/etc/xdg/pip/pip.conf"), True),
        pc.ConfigFile("global", Path("/etc/pip.conf"), True),
        pc.ConfigFile("site", Path("/venv/pip.conf"), False),
        pc.ConfigFile("user", Path("/root/.config/pip/pip.conf"), True),
    ]


_scope = st.sampled_from(pc.SCOPES)
_path = st.lists(st.text("abc-_.", min_size=1, max_size=8), min_size=1, max_size=4).map(lambda p: "/" + "/".join(p))


@given(st.lists(st.tuples(_scope, _path, st.booleans()), max_size=6))
def test_parse_reads_back_any_listing_in_pips_format(entries: list[tuple[str, str, bool]]) -> None:
    text = "".join(f"{scope}:\n  {path}, exists: {exists}\n    global.x: y\n" for scope, path, exists in entries)
    assert pc.parse_config_debug(text) == [pc.ConfigFile(s, Path(p), e) for s, p, e in entries]


@given(st.text())
def test_parse_never_raises_on_arbitrary_text(text: str) -> None:
    assert all(f.scope in pc.SCOPES for f in pc.parse_config_debug(text))


def test_broken_pip_config_is_one_line_naming_the_file(
    pip_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.conf"
    broken.write_text("[global]\nfind-links = /x\n[install\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(broken))
    assert pc.main(["--python", pip_python]) == pc.ExitCode.PIP_CONFIG_ERROR
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert err.count("\n") == 1
    assert str(broken) in err


def test_unmountable_path_is_refused() -> None:
    context = pc.PipContext((pc.Mount(Path("/a,b"), Path("/a,b")),), ())
    with pytest.raises(pc.PipContextError, match="comma"):
        pc.docker_arguments(context)


def test_prints_docker_arguments(
    pip_python: str, fake_host: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [n for n in os.environ if n.startswith(("PIP_", "UV_"))]:
        monkeypatch.delenv(name)
    for name, value in fake_host.items():
        monkeypatch.setenv(name, value)
    assert pc.main(["--python", pip_python, "--container-home", str(HOME_IN)]) == pc.ExitCode.OK
    lines = capsys.readouterr().out.splitlines()
    assert f"--env=PIP_FIND_LINKS={fake_host['PIP_FIND_LINKS']}" in lines
    conf = fake_host["PIP_CONFIG_FILE"]
    assert f"--mount=type=bind,source={conf},target={conf},readonly" in lines


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nope"], "error: unrecognized arguments: --nope"),
        (["--container-home"], "error: argument --container-home: expected one argument"),
    ],
)
def test_bad_command_line_is_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert pc.main(argv) == pc.ExitCode.USAGE
    assert capsys.readouterr().err == message + "\n"


@pytest.mark.parametrize(
    ("script", "args", "message"),
    [
        ("build-base-image.sh", ["--bogus"], "error: unknown option: --bogus (see --help)"),
        ("build-base-image.sh", ["--tag"], "error: --tag needs a value"),
        ("run-in-container.sh", ["--bogus"], "error: unknown option: --bogus (see --help)"),
        ("run-in-container.sh", ["--image"], "error: --image needs a value"),
    ],
)
def test_scripts_reject_bad_options_in_one_line(script: str, args: list[str], message: str) -> None:
    done = subprocess.run(["bash", str(INFRA / script), *args], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr, done.stdout) == (2, message + "\n", "")


@pytest.mark.parametrize("script", ["build-base-image.sh", "run-in-container.sh"])
def test_scripts_explain_themselves(script: str) -> None:
    done = subprocess.run(["bash", str(INFRA / script), "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0
    assert done.stdout.startswith(f"usage: infra/{script}")
    assert "exit codes:" in done.stdout
