"""Copy workflows/*.yml into .github/workflows/, where GitHub runs them (it does not follow symlinks there).

`workflows/` is where they are written and reviewed; each copy starts with a line naming its source. `--check`
changes nothing and exits 1 naming every copy that is missing, stale or has no source any more.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "workflows"
TARGET = ROOT / ".github" / "workflows"
HEADER = "# Generated from workflows/{name} by tools/sync_workflows.py: edit that file, then run the tool.\n"


def expected() -> dict[str, str]:
    """Each copy's name and text."""
    return {p.name: HEADER.format(name=p.name) + p.read_text(encoding="utf-8") for p in sorted(SOURCE.glob("*.yml"))}


def differences(wanted: dict[str, str]) -> list[str]:
    """One line per copy that is missing, stale, or left over."""
    found = []
    for name, text in wanted.items():
        copy = TARGET / name
        if not copy.exists():
            found.append(f"{copy.relative_to(ROOT)}: missing")
        elif copy.read_text(encoding="utf-8") != text:
            found.append(f"{copy.relative_to(ROOT)}: stale (workflows/{name} changed)")
    leftover = [p for p in sorted(TARGET.glob("*.yml")) if p.name not in wanted]
    found += [f"{p.relative_to(ROOT)}: no workflows/{p.name}" for p in leftover]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a copy is not current")
    args = parser.parse_args(argv)
    wanted = expected()
    stale = differences(wanted)
    if args.check:
        for line in stale:
            print(f"error: {line}; run python tools/sync_workflows.py", file=sys.stderr)
        return 1 if stale else 0
    TARGET.mkdir(parents=True, exist_ok=True)
    for name, text in wanted.items():
        (TARGET / name).write_text(text, encoding="utf-8")
    for path in TARGET.glob("*.yml"):
        if path.name not in wanted:
            path.unlink()
    print(f"{len(wanted)} workflows in {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
