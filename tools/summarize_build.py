"""Print what a build produced: one line per wheel from dist/manifest.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Summarise the manifest given as the only argument."""
    args = sys.argv[1:] if argv is None else argv
    manifest = json.loads(Path(args[0]).read_text())
    print(f"commit {manifest['git_sha'][:12]}  torch {manifest['torch_version']}")
    for wheel in manifest["wheels"]:
        print(f"  {wheel['distribution']:<22} {wheel['version']:<8} {wheel['file']}  sha256:{wheel['sha256'][:12]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
