"""Fuzz `crcr gate` in-process with mutated real-shaped client_payloads and count what comes out.

Each case is a committed fixture (`tests/payloads/`) mutated by `tests/payload_mutations.py` (fields dropped or
retyped, huge strings, control characters, line separators, bidi overrides, lone surrogates, plausible other values,
random JSON; truncated, flipped, non-UTF-8, oversized or deeply nested bytes), fed on stdin to `crcr.cli.main` with
GITHUB_OUTPUT set, under a guard that makes any attempt to start a process raise. The policy is the shipped one with
label polling off, so nothing leaves the process. Counted: decisions to run, to skip, rejections (exit 2 with one
`error:` line), malformed rejections (exit 2 with anything else on stderr) and tracebacks (any exception escaping
main, a spawn attempt included). Exit 1 when there is a traceback or a malformed rejection.

    python packages/dispatch/benchmarks/fuzz_payloads.py [--count 10000] [--seed 0]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from crcr.cli import main
from gate_support import fixtures, no_process_spawned, write_policy
from payload_mutations import mutate


def _field(error: str) -> str:
    """The field an `error:` line names (its text up to the first `: `), for the tally of rejection kinds."""
    return error.removeprefix("error: ").split(": ", 1)[0]


def run(count: int, seed: int) -> int:
    rng, docs = random.Random(seed), fixtures()
    names = sorted(docs)
    tally: Counter[str] = Counter()
    fields: Counter[str] = Counter()
    first_tracebacks: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        policy, outputs = write_policy(Path(scratch), seconds=0), Path(scratch) / "github_output"
        os.environ["GITHUB_OUTPUT"] = str(outputs)
        argv = ["gate", "--payload", "-", "--policy", str(policy), "--github-api", "http://127.0.0.1:9"]
        start = time.perf_counter()
        for _ in range(count):
            raw = mutate(docs[rng.choice(names)], rng)
            sys.stdin = io.TextIOWrapper(io.BytesIO(raw))
            out, err = io.StringIO(), io.StringIO()
            outputs.write_text("")
            try:
                with no_process_spawned(), redirect_stdout(out), redirect_stderr(err):
                    code = main(argv)
            except BaseException:
                tally["traceback"] += 1
                if len(first_tracebacks) < 3:
                    first_tracebacks.append(traceback.format_exc())
                continue
            text = err.getvalue()
            if code == 0 and text == "":
                tally["run" if json.loads(out.getvalue())["run"] else "skip"] += 1
            elif code == 2 and text.startswith("error: ") and text.count("\n") == 1 and not out.getvalue():
                tally["rejected"] += 1
                fields[_field(text)] += 1
            else:
                tally["malformed"] += 1
        seconds = time.perf_counter() - start
    sys.stdin = sys.__stdin__
    print(f"payloads fuzzed: {count} (seed {seed}) in {seconds:.1f} s, {count / seconds:,.0f} payloads/s")
    for kind in ("run", "skip", "rejected", "malformed", "traceback"):
        print(f"  {kind:<10} {tally[kind]:>7}")
    print(f"  distinct rejected fields: {len(fields)}; most common: "
          + ", ".join(f"{name} {n}" for name, n in fields.most_common(6)))  # fmt: skip
    for text in first_tracebacks:
        print(text, file=sys.stderr)
    return 1 if tally["traceback"] or tally["malformed"] else 0


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000, help="payloads to fuzz (default: 10000)")
    parser.add_argument("--seed", type=int, default=0, help="the random seed (default: 0)")
    args = parser.parse_args(argv)
    return run(args.count, args.seed)


if __name__ == "__main__":
    sys.exit(main_())
