"""The pipeline names no device: what a backend is, where it comes from and how it runs are its device profile's, so
a vendor adds a profile and configs and touches no code. This greps the pipeline's code, its workflows and the
noxfile's pipeline sessions for every name a profile declares."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
#: The noxfile's sessions that drive the pipeline (the others build and test this repository's packages).
PIPELINE_SESSIONS = {"ci", "gc", "prepare", "leg", "merge", "reproduce", "_install_driver", "_crcr"}


def _requirement(text: str) -> str:
    return re.split(r"[\[<>=!~; ]", text.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _device_names() -> set[str]:
    """Each profile's name and device, its backend module, its distributions, and the import names of the workspace
    packages only some profiles ask for (a device's own packages, not the harness every device runs with)."""
    profiles = [(p.stem, yaml.safe_load(p.read_text())) for p in sorted((REPO / "configs" / "devices").glob("*.yaml"))]
    names: set[str] = set()
    asked: list[set[str]] = []
    for stem, profile in profiles:
        names |= {stem, profile["device"]}
        if profile.get("backend"):
            names.add(profile["backend"].split(":")[0].split(".")[0])
        names |= set(profile.get("source", {}).get("distributions", []))
        asked.append({_requirement(r) for r in profile.get("requirements", [])})
    own = set.union(*asked) - set.intersection(*asked)
    for pyproject in REPO.glob("packages/*/pyproject.toml"):
        if tomllib.loads(pyproject.read_text())["project"]["name"] in own:
            names |= {p.name for p in (pyproject.parent / "src").iterdir() if p.is_dir() and p.name.isidentifier()}
    return names


def _pipeline_texts() -> dict[str, str]:
    texts = {str(p.relative_to(REPO)): p.read_text() for p in (REPO / "packages" / "dispatch" / "src").rglob("*.py")}
    for folder in ("workflows", ".github/workflows"):
        texts |= {str(p.relative_to(REPO)): p.read_text() for p in (REPO / folder).glob("*.y*ml")}
    source = (REPO / "noxfile.py").read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name in PIPELINE_SESSIONS:
            texts[f"noxfile.py:{node.name}"] = ast.get_source_segment(source, node) or ""
    return texts


def test_the_names_include_every_profiles_device_and_its_own_packages() -> None:
    names = _device_names()
    assert {"ring", "fallbackdev", "ringsim", "ring_inductor", "fallback_backend"} <= names
    assert "testreuse" not in names  # every device runs with it: the harness, not a device's


def test_the_pipeline_code_and_workflows_name_no_device() -> None:
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, sorted(_device_names()))) + r")(?![\w-])")
    found = [
        f"{where}:{number}: {line.strip()}"
        for where, text in _pipeline_texts().items()
        for number, line in enumerate(text.splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, "device names in the pipeline:\n" + "\n".join(found)
