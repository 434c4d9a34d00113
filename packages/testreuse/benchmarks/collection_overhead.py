"""Collection time with the testreuse plugin against plain pytest on the same upstream files, and cases per mode.

Both sides run `pytest --collect-only` in a fresh process on the same files with the same backend registered, and are
interleaved and repeated (the minimum is kept) after one discarded warm-up run each, with bytecode caches redirected
to a scratch folder (`PYTHONPYCACHEPREFIX`) so neither side compiles from source and nothing lands in the tree. The
plugin side uses a config that keeps every case (`unlisted_test_mode: mandatory_success`, no capabilities), so it does
the same instantiation work plus its own classification; a second plugin run with the given configs (e.g. a device's
`configs/` folder) reports how many cases land in each mode.

    python benchmarks/collection_overhead.py --backend fallback_backend:load --pythonpath tests/backends
    python benchmarks/collection_overhead.py --configs src/testreuse/upstream/configs   # ring autoloads
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import testreuse

EMBEDDED = Path(testreuse.__file__).resolve().parent / "upstream"
KEEP_ALL = """\
test_suite_config:
  files:
{entries}
"""


def _pytest(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int]:
    """Wall time of one collect-only process, and how many cases it collected."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=cwd, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    took = time.perf_counter() - started
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise SystemExit("error: collection failed: " + " | ".join(tail))
    counted = re.search(r"(\d+) tests? collected", done.stdout)
    return took, int(counted.group(1)) if counted else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--torch-root", type=Path, default=EMBEDDED)
    parser.add_argument("--files", nargs="*", help="test files under TORCH_ROOT (default: every test/test_*.py)")
    parser.add_argument("--backend", help="MODULE[:FUNC] registering the privateuse1 backend (else: autoload)")
    parser.add_argument("--pythonpath", type=Path, help="folder to put on PYTHONPATH for --backend")
    parser.add_argument("--configs", nargs="*", default=[], help="device configs for the per-mode case counts")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs per side; 0 skips timing")
    args = parser.parse_args(argv)

    root = args.torch_root.resolve()
    files = [root / f for f in args.files] if args.files else sorted((root / "test").glob("test_*.py"))
    env = dict(os.environ)
    if args.pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(args.pythonpath.resolve()), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="testreuse-bench-") as scratch:
        work = Path(scratch)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        keep_all = work / "keep_all.yaml"
        entries = "\n".join(f"    - {{path: '{f}', unlisted_test_mode: mandatory_success}}" for f in files)
        keep_all.write_text(KEEP_ALL.format(entries=entries))
        backend_plain = []
        backend_plugin = ["--torch-root", str(root)]
        if args.backend:
            module, _, function = args.backend.partition(":")
            loader = work / "register_backend.py"
            call = f"\n{module}.{function}()" if function else ""
            loader.write_text(f"import {module}{call}\n")
            backend_plain = ["-p", "register_backend"]
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(work), env.get("PYTHONPATH")]))
            backend_plugin += ["--testreuse-backend", args.backend]
        plain = ["-p", "no:testreuse", *backend_plain, *map(str, files)]
        plugin = ["--testreuse-config", str(keep_all), *backend_plugin]
        # The plugin instantiates only the device under test; so does the baseline, through torch's own switch.
        env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = "privateuse1"
        timings: dict[str, list[float]] = {"plain": [], "plugin": []}
        counts: dict[str, int] = {}
        print(f"files: {len(files)} under {root}")
        if args.repeat > 0:
            _pytest(plain, env, work)
            _pytest(plugin, env, work)
            for _ in range(args.repeat):
                for side, argv_side in (("plain", plain), ("plugin", plugin)):
                    took, counts[side] = _pytest(argv_side, env, work)
                    timings[side].append(took)
            plain_s, plugin_s = min(timings["plain"]), min(timings["plugin"])
            print(f"plain pytest --collect-only:   {plain_s:7.2f} s (min of {args.repeat}), {counts['plain']} cases")
            print(f"with testreuse (keep all):     {plugin_s:7.2f} s (min of {args.repeat}), {counts['plugin']} cases")
            print(f"ratio plugin/plain:            {plugin_s / plain_s:7.3f} (goal <= 1.2)")
        if args.configs:
            plan = work / "plan.jsonl"
            configs = [a for c in args.configs for a in ("--testreuse-config", str(Path(c).resolve()))]
            _pytest([*configs, *backend_plugin, "--testreuse-plan", str(plan)], env, work)
            modes = Counter(json.loads(line)["mode"] for line in plan.read_text().splitlines())
            print(
                f"cases per mode ({', '.join(args.configs)}): "
                + ", ".join(f"{m} {n}" for m, n in sorted(modes.items()))
            )
            print(f"total cases: {sum(modes.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
