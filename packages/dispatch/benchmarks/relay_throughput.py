"""How many callbacks per second the local relay sustains, and at what latency.

Starts `crcr relay serve` as a subprocess (the same process a local CI loop talks to), dispatches one delivery per
client thread, and has each thread send valid in_progress/completed pairs (one job name per pair, like matrix legs)
over one keep-alive connection, with a token minted from the relay's runner token endpoint; the clock starts once
every thread holds its dispatch and token. The rate limit is raised out of the way. Prints requests/second and
p50/p99 latency; exits 1 on any status other than 200 or any job left unfinished.

    .venv/bin/python packages/dispatch/benchmarks/relay_throughput.py --threads 8 --pairs 250
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from crcr.relay.issuer import AUDIENCE, with_audience

REPO = "bench/accel"
LOCK = threading.Lock()
PUSH = {"ref": "refs/heads/main", "before": "b" * 40, "after": "d" * 40}


def start(folder: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """`crcr relay serve` on a free port; its ready file's URLs."""
    ready = folder / "ready.json"
    crcr = str(Path(sys.executable).with_name("crcr"))
    command = [crcr, "relay", "serve", "--db", str(folder / "relay.db"), "--repo", REPO, "--rate-limit", "1000000000",
               "--ready-file", str(ready)]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            sys.exit(f"crcr relay serve did not start: {process.communicate()}")
        time.sleep(0.05)
    return process, json.loads(ready.read_text())


def fetch_json(url: str, data: Any = None, bearer: str | None = None) -> Any:
    """GET (or POST `data`) and decode the JSON answer."""
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {bearer}"} if bearer else {})
    body = None if data is None else json.dumps(data).encode()
    with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=30) as answer:
        return json.loads(answer.read())


def flow(status: str, job_name: str) -> dict[str, Any]:
    started = status == "in_progress"
    return {"schema_version": "1", "status": status, "conclusion": None if started else "success", "run_id": "1",
            "run_attempt": "1", "job_name": job_name, "name": "bench", "check_run_id": "1-1",
            "started_at": "2026-12-01T10:00:00Z" if started else None,
            "completed_at": None if started else "2026-12-01T10:01:00Z",
            "test_results": None if started else {"passed": 100, "failed": 0, "skipped": 3, "total": 103}}  # fmt: skip


def client(ready: dict[str, str], worker: int, pairs: int, go: threading.Barrier, latencies: list[float],
           statuses: Counter) -> None:  # fmt: skip
    """One matrix's worth of legs: `pairs` jobs, each in_progress then completed, on one connection."""
    payload = fetch_json(f"{ready['url']}/dispatch", {"event_type": "push", "payload": PUSH})["client_payload"]
    token_url = with_audience(ready["token_request_url"], AUDIENCE)
    token = fetch_json(token_url, bearer=ready["token_request_token"])["value"]
    where = urllib.parse.urlsplit(ready["callback_url"])
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    mine: list[float] = []
    seen: Counter = Counter()
    go.wait()
    for i in range(pairs):
        for status in ("in_progress", "completed"):
            body = json.dumps({**payload, "workflow": flow(status, f"leg {worker}-{i}")})
            began = time.perf_counter()
            connection.request("POST", where.path, body, headers)
            answer = connection.getresponse()
            answer.read()
            mine.append(time.perf_counter() - began)
            seen[answer.status] += 1
    connection.close()
    with LOCK:
        latencies.extend(mine)
        statuses.update(seen)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=8, help="concurrent clients (default: 8)")
    parser.add_argument("--pairs", type=int, default=250, help="in_progress/completed pairs per client (default: 250)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="relay-bench-") as folder:
        process, ready = start(Path(folder))
        latencies: list[float] = []
        statuses: Counter = Counter()
        try:
            go = threading.Barrier(args.threads + 1)
            threads = [threading.Thread(target=client, args=(ready, w, args.pairs, go, latencies, statuses))
                       for w in range(args.threads)]  # fmt: skip
            for thread in threads:
                thread.start()
            go.wait()
            began = time.perf_counter()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - began
            jobs = fetch_json(f"{ready['url']}/api/deliveries?repo={REPO}")["deliveries"]
        finally:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=30)
    completed = sum(1 for d in jobs for j in d["jobs"] if j["status"] == "COMPLETED")
    quantiles = statistics.quantiles(latencies, n=100)
    print(f"{len(latencies)} callbacks from {args.threads} threads in {elapsed:.2f} s (after dispatch and tokens)")
    print(f"throughput: {len(latencies) / elapsed:.0f} requests/s")
    print(f"latency: p50 {quantiles[49] * 1000:.2f} ms, p99 {quantiles[98] * 1000:.2f} ms")
    print(f"statuses: {dict(sorted(statuses.items()))}; jobs completed: {completed}/{args.threads * args.pairs}")
    print(f"relay exit: {process.returncode}")
    ok = set(statuses) == {200} and completed == args.threads * args.pairs and process.returncode == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
