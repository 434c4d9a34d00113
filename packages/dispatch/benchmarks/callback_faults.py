"""Callback pairs under a faulty relay: every pair completed, none duplicated.

Starts `crcr relay serve --fail-ratio R` (a third of callbacks answered 429 or 503 by default), dispatches one
pull_request, then runs M matrix legs, each one `crcr callback run --matrix leg=N -- true` process (in_progress, the
command, completed; the OIDC token minted from the relay's runner endpoint as in GitHub Actions), W at a time. Then it
reads the relay's own store: pairs completed, callbacks accepted twice for one job and status (duplicates), retries the
clients spent (from their "took N attempts" lines), elapsed time. Exit 1 if any pair is incomplete or duplicated.

    .venv/bin/python packages/dispatch/benchmarks/callback_faults.py --legs 200 --workers 8 --fail-ratio 0.33
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from crcr import http
from crcr.relay.store import Store

CRCR = str(Path(sys.executable).parent / "crcr")
WEBHOOK = {
    "action": "synchronize",
    "number": 175022,
    "pull_request": {"number": 175022, "head": {"sha": "a" * 40, "repo": {"full_name": "pytorch/pytorch"}},
                     "base": {"ref": "main"}, "labels": [{"name": "ciflow/crcr/ring"}], "merged": False},
    "repository": {"full_name": "pytorch/pytorch"},
}  # fmt: skip
ATTEMPTS = re.compile(r"took (\d+) attempts")
REQUEST_TOKEN_ENV = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"


def _serve(work: Path, fail_ratio: float, seed: int) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    ready = work / "ready.json"
    argv = [CRCR, "relay", "serve", "--db", str(work / "relay.sqlite"), "--fail-ratio", str(fail_ratio),
            "--fail-seed", str(seed), "--rate-limit", "1000000", "--ready-file", str(ready)]  # fmt: skip
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not ready.exists():
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the relay did not start")
        time.sleep(0.05)
    return server, json.loads(ready.read_text())


def _leg(index: int, payload: Path, env: dict[str, str], state: Path) -> tuple[int, int]:
    """One leg's pair; (exit status, retries spent)."""
    argv = [CRCR, "callback", "run", "--payload", str(payload), "--matrix", f"leg={index}", "--state-dir", str(state),
            "--", "true"]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if env[REQUEST_TOKEN_ENV] in done.stdout + done.stderr:
        raise SystemExit("a token reached the output")
    return done.returncode, sum(int(n) - 1 for n in ATTEMPTS.findall(done.stderr))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--legs", type=int, default=200, help="matrix legs, one pair each (default: 200)")
    parser.add_argument("--workers", type=int, default=8, help="legs at a time (default: 8)")
    parser.add_argument("--fail-ratio", type=float, default=0.33, help="callbacks the relay faults (default: 0.33)")
    parser.add_argument("--seed", type=int, default=1, help="the fault seed (default: 1)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="crcr-callback-faults-") as tmp:
        work = Path(tmp)
        server, info = _serve(work, args.fail_ratio, args.seed)
        try:
            answer = http.request("POST", f"{info['url']}/dispatch", json_body={"event_type": "pull_request",
                                                                                  "payload": WEBHOOK})  # fmt: skip
            payload = work / "client_payload.json"
            payload.write_text(json.dumps(answer.body["client_payload"]))
            env = {**os.environ, "CRCR_CALLBACK_URL": info["callback_url"], "GITHUB_WORKFLOW": "downstream",
                   "GITHUB_REPOSITORY": "tributary/tributary", "GITHUB_RUN_ID": "31337", "GITHUB_RUN_ATTEMPT": "1",
                   "GITHUB_JOB": "test", "ACTIONS_ID_TOKEN_REQUEST_URL": info["token_request_url"],
                   REQUEST_TOKEN_ENV: info["token_request_token"]}  # fmt: skip
            env.pop("CRCR_TOKEN", None)
            started = time.monotonic()
            with ThreadPoolExecutor(args.workers) as pool:
                results = list(pool.map(lambda i: _leg(i, payload, env, work / "state"), range(args.legs)))
            elapsed = time.monotonic() - started
        finally:
            server.terminate()
            server.wait(timeout=30)
        store = Store(work / "relay.sqlite")
        jobs = store.jobs()
        accepted = Counter((c["body"]["workflow"]["job_name"], c["status"]) for c in store.callbacks())
    completed = sum(1 for j in jobs if j["status"] == "COMPLETED" and accepted[(j["job_name"], "completed")] == 1
                    and accepted[(j["job_name"], "in_progress")] == 1)  # fmt: skip
    duplicates = sum(n - 1 for n in accepted.values() if n > 1)
    failed_legs = sum(1 for code, _ in results if code != 0)
    print(f"legs: {args.legs}, workers: {args.workers}, fail ratio: {args.fail_ratio}, seed: {args.seed}")
    print(f"pairs completed: {completed}/{args.legs}")
    print(f"duplicates: {duplicates}")
    print(f"retries spent: {sum(r for _, r in results)}")
    print(f"legs exiting non-zero: {failed_legs}")
    print(f"elapsed: {elapsed:.1f} s ({2 * args.legs / elapsed:.1f} callbacks/s)")
    return 0 if completed == args.legs and duplicates == 0 and not failed_legs else 1


if __name__ == "__main__":
    sys.exit(main())
