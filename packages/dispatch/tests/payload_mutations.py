"""Mutations of real-shaped client_payloads for the fuzz test and the fuzz benchmark, driven by one random.Random
(the benchmark seeds it; hypothesis hands the test one it can shrink).

A case is one to three edits on a fixture, each at a random path but more often at a field the gate reads: drop it,
give it another type, a huge string, a string with a control character, line separator, bidi override, NUL or lone
surrogate, a plausible other value (so that decisions other than the fixture's come up), or random JSON; and
sometimes a text-level edit of the serialised bytes: truncated, a byte flipped, bytes that are not UTF-8, padding
past GitHub's 65,536-byte cap, deep nesting.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from gate_support import DEVICE

READ = [
    ("event_type",), ("delivery_id",), ("payload", "action"), ("payload", "number"), ("payload", "ref"),
    ("payload", "before"), ("payload", "after"), ("payload", "deleted"), ("payload", "created"),
    ("payload", "repository", "full_name"), ("payload", "pull_request", "title"), ("payload", "pull_request", "merged"),
    ("payload", "pull_request", "merge_commit_sha"), ("payload", "pull_request", "state"),
    ("payload", "pull_request", "head", "ref"), ("payload", "pull_request", "head", "sha"),
    ("payload", "pull_request", "head", "repo"), ("payload", "pull_request", "base", "ref"),
    ("payload", "pull_request", "labels"), ("payload", "pull_request", "number"),
]  # fmt: skip
PLAUSIBLE = [
    "main", "release/2.14", "release/*", "viable/strict", "refs/heads/main", "refs/heads/release/2.14",
    f"refs/tags/ciflow/crcr/{DEVICE}/1", "refs/tags/v2.14.0", "refs/heads/feature", "opened", "closed", "synchronize",
    "reopened", "labeled", "push", "pull_request", "Merged", "0" * 40, "a" * 40, "pytorch/pytorch", "x..y", "-rf",
    "$(reboot)", "`id`", "a;b", "", True, False, None, 0, 1, -1, 2**31, 171234,
]  # fmt: skip
HOSTILE = ["\n", "\r\n", "\x00", "\x1b[31m", "\u2028", "\u202e", "\ud800", "\x7f", "\t", "${{ github.token }}"]


def _walk(doc: Any, rng: random.Random) -> list[Any]:
    """A random path into `doc`: half the time a field the gate reads, else a random descent, mostly in the webhook."""
    if rng.random() < 0.5:
        return list(rng.choice(READ))
    path: list[Any] = ["payload"] if rng.random() < 0.9 and isinstance(doc, dict) and "payload" in doc else []
    node = doc[path[0]] if path else doc
    while isinstance(node, dict | list) and node and rng.random() < 0.8:
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        path.append(key)
        node = node[key]
    return path


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(7 if depth < 3 else 4)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False, rng.randint(-(2**40), 2**40), rng.random() * 1e6])
    if kind in (2, 3):
        return "".join(
            chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 0x3000)])) for _ in range(rng.randrange(12))
        )
    if kind == 4:
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {str(_random_json(rng, 3)): _random_json(rng, depth + 1) for _ in range(rng.randrange(4))}


def _value(old: Any, rng: random.Random) -> Any:
    choice = rng.randrange(6)
    if choice == 0:
        return rng.choice(PLAUSIBLE)
    if choice == 1:
        return "x" * rng.choice([256, 1025, 5000, 70_000])
    if choice == 2 and isinstance(old, str) and old:
        at = rng.randrange(len(old) + 1)
        return old[:at] + rng.choice(HOSTILE) + old[at:]
    if choice == 3:
        return rng.choice([None, 0, 1.5, True, [], {}, "", [old], {"name": old}])
    return _random_json(rng)


def _edit(doc: Any, rng: random.Random) -> Any:
    path = _walk(doc, rng)
    if not path:
        return _value(doc, rng)
    parent = doc
    for key in path[:-1]:
        try:
            parent = parent[key]
        except (KeyError, IndexError, TypeError):
            return doc
    last = path[-1]
    if not isinstance(parent, dict | list) or (isinstance(parent, list) and not isinstance(last, int)):
        return doc
    if isinstance(parent, list) and last >= len(parent):
        return doc
    if rng.random() < 0.25 and isinstance(parent, dict):
        parent.pop(last, None)
    else:
        parent[last] = _value(parent.get(last) if isinstance(parent, dict) else parent[last], rng)
    return doc


def _bytes(text: bytes, rng: random.Random) -> bytes:
    choice = rng.randrange(6)
    if choice == 0:
        return text[: rng.randrange(len(text) + 1)]
    if choice == 1 and text:
        at = rng.randrange(len(text))
        return text[:at] + bytes([rng.randrange(256)]) + text[at + 1 :]
    if choice == 2:
        return text + b" " * (65_537 - len(text) + rng.randrange(3) - 1)
    if choice == 3:
        return b"[" * rng.choice([10, 1000, 60_000]) + b"]" * rng.randrange(3)
    if choice == 4:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
    return b"\xff\xfe" + text


def mutate(doc: dict[str, Any], rng: random.Random) -> bytes:
    """One fuzz case from the fixture `doc` (left untouched)."""
    case = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        case = _edit(case, rng)
    text = json.dumps(case, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
    return _bytes(text, rng) if rng.random() < 0.15 else text
