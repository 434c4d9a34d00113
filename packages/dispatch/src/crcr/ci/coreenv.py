"""`crcr env`: an interpreter holding one torch core, for tools that compare two torches (`testselect upgrade --to`,
the selector's upgrade test in `nox -s "tests(selector)"`).

Nothing of its own: the core is fetched as `crcr ci` fetches one (`cores.torch_wheel`, once, into
`cache/wheelhouse/torch-VERSION/` with pip, whose configuration `uv` does not read) and the venv is made as a
combination's is (`envs.environment`, once per key under `cache/envs/`), with no backend wheels.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from crcr.ci import cores, envs
from crcr.ci.model import BuildResult


def core_environment(core: str, requirements: list[str], cache: Path) -> Path:
    """The python of a venv under `cache/envs/` holding torch `core` and `requirements` (from the registries)."""
    return envs.environment(BuildResult(ok=True), cores.torch_wheel(core, cache), requirements, cache)


def _run(args: argparse.Namespace) -> int:
    print(core_environment(args.core, args.requirements, Path(args.cache).resolve()))
    return 0


def add_env(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("env", help="make (once) a venv holding one torch core; print its python")
    parser.add_argument("--core", required=True, help="a torch release, e.g. 2.14.1, or the name of an obtained core")
    parser.add_argument("--cache", default=".tributary", help="torch wheels and envs (default: .tributary)")
    what = "also installed, e.g. expecttest numpy (torch.testing._internal imports them)"
    parser.add_argument("requirements", nargs="*", metavar="REQUIREMENT", help=what)
    parser.set_defaults(run=_run)
