"""Test environments from recorded wheels: tiny hand-made wheels (a stand-in torch and two backend members) keep it
fast; the one third-party package (`iniconfig`, a test extra) comes from the registry uv reaches."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import zipfile
from pathlib import Path

import pytest
from crcr.ci.envs import KEY_FILE, EnvError, environment, requirements
from crcr.ci.model import BuildResult


def make_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = (), test: str = "") -> Path:
    """A minimal valid pure-Python wheel with one module; `test` is the requirement of its `test` extra."""
    folder.mkdir(parents=True, exist_ok=True)
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    if test:
        metadata += f"Provides-Extra: test\nRequires-Dist: {test} ; extra == 'test'\n"
    files = {
        f"{module}/__init__.py": f'NAME = "{name}"\n',
        f"{info}/METADATA": metadata,
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    wheel = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel


def built(*wheels: Path) -> BuildResult:
    names = {w: w.name.split("-")[0].replace("_", "-") for w in wheels}
    return BuildResult(
        ok=True,
        wheels={names[w]: str(w) for w in wheels},
        wheel_sha256={names[w]: hashlib.sha256(w.read_bytes()).hexdigest() for w in wheels},
    )


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BuildResult, Path]:
    root = tmp_path_factory.mktemp("parts")
    torch = make_wheel(root / "wheelhouse" / "torch-9.9.0", "torch", "9.9.0")
    alpha = make_wheel(root / "build", "tmp-alpha", "0.1.0", ("torch>=9",))
    beta = make_wheel(root / "build", "tmp-beta", "0.1.0", ("tmp-alpha",), test="iniconfig")
    return torch, built(alpha, beta), tmp_path_factory.mktemp("cache")


def run(python: Path, code: str) -> str:
    return subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def test_environment_holds_torch_the_wheels_and_their_test_extras(parts: tuple[Path, BuildResult, Path]) -> None:
    torch, build, cache = parts
    python = environment(build, torch, ["tmp-beta[test]"], cache)
    assert python.is_file()
    assert python.parent.parent.parent == cache / "envs"
    assert run(python, "import torch, tmp_alpha, tmp_beta, iniconfig; print(torch.__file__)").startswith(
        str(python.parent.parent)
    )
    key = python.parent.parent / KEY_FILE
    stamp = key.stat().st_mtime_ns
    assert environment(build, torch, ["tmp-beta[test]"], cache) == python  # reused
    assert key.stat().st_mtime_ns == stamp


def test_environment_modules_are_compiled_once_at_install(parts: tuple[Path, BuildResult, Path]) -> None:
    """Test processes never write bytecode (PYTHONDONTWRITEBYTECODE): they import what the install compiled."""
    torch, build, cache = parts
    python = environment(build, torch, ["tmp-beta[test]"], cache)
    code = "import sys, torch, tmp_beta; print(torch.__cached__, sys.flags.dont_write_bytecode)"
    done = subprocess.run(
        [str(python), "-c", code], env={"PYTHONDONTWRITEBYTECODE": "1"}, capture_output=True, text=True, check=True
    )
    cached, flag = done.stdout.split()
    assert flag == "1"
    assert Path(cached).is_file()  # compiled by the install, not by this process


def test_pins_hold_third_party_packages_at_their_recorded_versions(tmp_path: Path) -> None:
    """A reproduce installs what the run had, not what resolves today: with pins, the older version; the pins are
    part of the environment's key."""
    torch = make_wheel(tmp_path / "wheelhouse" / "torch-9.9.0", "torch", "9.9.0")
    for version in ("0.1.0", "0.2.0"):
        make_wheel(tmp_path / "build", "tmp-dep", version)
    backend = built(make_wheel(tmp_path / "build", "tmp-user", "0.1.0", ("tmp-dep",)))
    cache = tmp_path / "cache"
    pins = tmp_path / "requirements.txt"
    pins.write_text("tmp-dep==0.1.0\n")
    version = "import importlib.metadata as m; print(m.version('tmp-dep'))"
    assert run(environment(backend, torch, ["tmp-user"], cache), version) == "0.2.0"
    assert run(environment(backend, torch, ["tmp-user"], cache, pins), version) == "0.1.0"


def test_excluded_dependencies_of_torch_are_left_out_and_are_another_environment(tmp_path: Path) -> None:
    """A device profile's `excludes` (torch's triton, for a device that never loads it): torch is installed without
    it, whoever requires it, and the environment is not the one that has it."""
    wheelhouse = tmp_path / "wheelhouse" / "torch-9.9.0"
    make_wheel(wheelhouse, "tmp-compiler", "1.0.0")
    torch = make_wheel(wheelhouse, "torch", "9.9.0", ("tmp-compiler==1.0.0",))
    backend = built(make_wheel(tmp_path / "build", "tmp-device", "0.1.0", ("torch",)))
    cache = tmp_path / "cache"
    present = "import importlib.util as u; print(u.find_spec('tmp_compiler') is not None)"
    full = environment(backend, torch, ["tmp-device"], cache)
    lean = environment(backend, torch, ["tmp-device"], cache, excludes=["tmp-compiler"])
    assert lean != full
    assert (run(full, present), run(lean, present)) == ("True", "False")
    assert run(lean, "import torch, tmp_device; print(torch.NAME)") == "torch"


def test_other_extras_are_another_environment(parts: tuple[Path, BuildResult, Path]) -> None:
    torch, build, cache = parts
    plain = environment(build, torch, [], cache)
    assert plain != environment(build, torch, ["tmp-beta[test]"], cache)
    result = subprocess.run([str(plain), "-c", "import iniconfig"], capture_output=True, check=False)
    assert result.returncode != 0  # the extra is not there


def test_interrupted_environment_is_made_again(parts: tuple[Path, BuildResult, Path]) -> None:
    torch, build, cache = parts
    python = environment(build, torch, ["tmp-alpha"], cache)
    (python.parent.parent / KEY_FILE).unlink()
    assert environment(build, torch, ["tmp-alpha"], cache) == python
    assert (python.parent.parent / KEY_FILE).is_file()
    assert run(python, "import tmp_alpha; print(tmp_alpha.NAME)") == "tmp-alpha"


def test_failed_build_has_no_environment(parts: tuple[Path, BuildResult, Path]) -> None:
    torch, _, cache = parts
    with pytest.raises(EnvError, match=r"failed build: x\.c:1:2: error: #error no"):
        environment(BuildResult(ok=False, first_error="x.c:1:2: error: #error no"), torch, [], cache)


def test_unresolvable_install_is_one_line(parts: tuple[Path, BuildResult, Path], tmp_path: Path) -> None:
    torch, _, cache = parts
    pinned = make_wheel(tmp_path, "tmp-pinned", "0.1.0", ("torch==1.0.0",))
    with pytest.raises(EnvError, match="could not install") as info:
        environment(built(pinned), torch, ["tmp-pinned"], cache)
    assert "\n" not in str(info.value)
    assert "(cause: Because " in str(info.value)  # which requirement: uv's error line alone does not say
    assert "torch==1.0.0" in str(info.value)


def test_requirements_name_the_wheels_with_their_extras(parts: tuple[Path, BuildResult, Path]) -> None:
    _, build, _ = parts
    found = requirements(build, ["tmp_beta[test]", "tmp-alpha", "pytest-split>=0.10"])
    assert found[0].startswith("tmp-alpha @ file://")
    assert found[1].startswith("tmp-beta[test] @ file://")
    assert found[2] == "pytest-split>=0.10"


def test_torch_must_be_the_one_built_against(parts: tuple[Path, BuildResult, Path], tmp_path: Path) -> None:
    torch, build, cache = parts
    out = tmp_path / "builds" / "abc-def"
    out.mkdir(parents=True)
    (out / "manifest.json").write_text(json.dumps({"torch": {"sha256": "0" * 64, "version": "9.8.0"}}))
    against_other = BuildResult(True, build.wheels, build.wheel_sha256, log=str(out / "build.log"))
    with pytest.raises(EnvError, match=r"built against torch 000000000000, not torch-9\.9\.0"):
        environment(against_other, torch, [], cache)


def test_only_the_wheels_the_profile_names_are_installed(parts: tuple[Path, BuildResult, Path]) -> None:
    _, build, _ = parts
    found = requirements(build, ["tmp-beta"])
    assert [r.split(" @ ")[0] for r in found] == ["tmp-beta"]  # tmp-alpha (another backend, say) stays out
