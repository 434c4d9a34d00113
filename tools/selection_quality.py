"""Precision and recall of `testselect select`'s configs per upstream file, before any device run and after one.

Reproduces the selector README's table from a store with device-side evidence (`testselect evidence --device`) and
a truth (`testselect truth`, every case run on the device with every rule mandatory):

1. `testselect select` writes the configs from code, the evidence and the device's export (OUT/before).
2. Each file's config is scored alone against the truth (`testselect score`).
3. One device run of those configs: every case they make and do not skip, as the truth records it (the same device
   and tree ran it; a case the configs skip does not run). Its records are OUT/run.jsonl.
4. `testselect refine --write` re-buckets a copy of the configs from that run (OUT/after), which is scored again.

Prints a `progress:` line per step and the table (Markdown); writes OUT/quality.json.
Run: python tools/selection_quality.py --torch-root ROOT --store S.sqlite --truth TRUTH_DIR --profile P \
         --capabilities CAPS --device ring --out OUT
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

BIN = Path(sys.executable).parent


def _run(tool: str, *args: str) -> str:
    done = subprocess.run([str(BIN / tool), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"error: {tool} {' '.join(args[:2])} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return done.stdout


def _under_test(nodeid: str) -> str:
    """`test/test_x.py::C::t` and `/abs/root/test/test_x.py::C::t` alike, as `test_x.py::C::t`."""
    path, _, rest = nodeid.partition("::")
    return f"{path.rsplit('test/', 1)[-1]}::{rest}"


def _score(configs: Path, truth: list[Path], args: argparse.Namespace) -> dict:
    argv = ["score", "--configs", str(configs), "--truth", *map(str, truth), "--torch-root", str(args.torch_root)]
    return json.loads(_run("testselect", *argv, "--device", args.device, "--json"))


def _per_file(configs: Path, truth: list[tuple[dict, str]], args: argparse.Namespace, label: str) -> dict[str, dict]:
    """Each generated config (of `--files`) scored alone, in a folder of its own, against its file's truth; with
    more than one, all of them together against their files' truth as the row `all N files`."""
    chosen = {}
    for config in sorted(c for c in configs.glob("*.yaml") if any(c.match(glob) for glob in args.files)):
        upstream = re.search(r"path: \$\{TORCH_ROOT\}/(\S+)", config.read_text(encoding="utf-8"))
        if upstream is not None:
            chosen[config] = upstream.group(1)
    groups = {config.name: {config: file} for config, file in chosen.items()}
    if len(chosen) > 1:
        groups[f"all {len(chosen)} files"] = chosen
    scores = {}
    for name, group in groups.items():
        scores[name] = _score_alone(group, truth, args)
        s = scores[name]
        print(f"progress: {label} {name}: precision {s['precision']}, recall {s['recall']}", flush=True)
    return scores


def _score_alone(group: dict[Path, str], truth: list[tuple[dict, str]], args: argparse.Namespace) -> dict:
    """These configs in a folder of their own (no device file beside them), scored against their files' truth."""
    files = set(group.values())
    with tempfile.TemporaryDirectory() as folder:
        for config in group:
            shutil.copy(config, folder)
        own = Path(folder) / "truth.jsonl"
        own.write_text("".join(_records(truth, lambda r: r.get("file") in files)), encoding="utf-8")
        return _score(Path(folder), [own], args)


def _load(paths: list[Path]) -> list[tuple[dict, str]]:
    """Every truth record with its line, read once (a torn last line is no record)."""
    records = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                records.append((record, line + "\n"))
    return records


def _records(truth: list[tuple[dict, str]], keep: Callable[[dict], bool]) -> Iterator[str]:
    """The truth's record lines that `keep` accepts."""
    return (line for record, line in truth if keep(record))


def _device_run(configs: Path, truth: list[tuple[dict, str]], args: argparse.Namespace, out: Path) -> int:
    """The truth's records of the cases the configs run (any mode but skip), as one run's results file."""
    argv = ["list", str(configs), "--format", "json", "--torch-root", str(args.torch_root)]
    listed = json.loads(_run("testreuse", *argv))
    runs = {_under_test(c["nodeid"]) for c in listed["cases"] if c["mode"] != "skip"}
    lines = list(_records(truth, lambda r: _under_test(str(r.get("nodeid", ""))) in runs))
    out.write_text("".join(lines), encoding="utf-8")
    return len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-root", type=Path, required=True)
    parser.add_argument("--store", type=Path, required=True, help="the index with device-side evidence")
    parser.add_argument("--truth", type=Path, required=True, help="a `testselect truth --out` folder")
    parser.add_argument("--profile", type=Path, required=True)
    parser.add_argument("--capabilities", type=Path, required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--files", nargs="+", default=["test_*.yaml"], help="configs to score (globs): test_*.yaml")
    args = parser.parse_args()
    paths = sorted((args.truth / "results").glob("run-*.jsonl"))
    if not paths:
        sys.exit(f"error: --truth {args.truth}: no results/run-*.jsonl (run `testselect truth --out` there first)")
    before, after = args.out / "before", args.out / "after"
    shutil.rmtree(args.out, ignore_errors=True)
    store = args.out / "store.sqlite"  # refine records the run in the store: a copy keeps the given one as it was
    args.out.mkdir(parents=True)
    shutil.copy(args.store, store)
    decide = ["--profile", str(args.profile), "--capabilities", str(args.capabilities), "--store", str(store)]
    _run("testselect", "select", *decide, "--out", str(before))
    print(f"progress: configs before any device run in {before}", flush=True)
    truth = _load(paths)
    scores = {"before": _per_file(before, truth, args, "before")}
    kept = _device_run(before, truth, args, args.out / "run.jsonl")
    print(f"progress: one device run of those configs: {kept} cases ({args.out / 'run.jsonl'})", flush=True)
    shutil.copytree(before, after)
    refine = ["--results", str(args.out / "run.jsonl"), "--configs", str(after), "--torch-root", str(args.torch_root)]
    _run("testselect", "refine", *refine, *decide, "--write")
    scores["after"] = _per_file(after, truth, args, "after")
    (args.out / "quality.json").write_text(json.dumps(scores, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print("\n| file | truth cases (pass) | admitted | precision | recall | after one run: precision | recall |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, s in scores["before"].items():
        a = scores["after"][name]
        cases = f"{s['total']:,} ({s['passing']:,})"
        figures = [s["precision"], s["recall"], a["precision"], a["recall"]]
        shown = " | ".join("-" if f is None else f"{f:.4f}" for f in figures)  # None: nothing admitted, or none passes
        print(f"| {name} | {cases} | {s['admitted_in_truth']:,} | {shown} |")


if __name__ == "__main__":
    main()
