"""`testselect similar`: BM25 over each test's name, class, file, summary, calls, ops, dtypes and features."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import bm25s

_WORD = re.compile(r"[A-Za-z][a-z]*|[A-Z]+(?![a-z])|\d+")
#: Words every test shares or a question adds ("tests about X"): they carry no signal.
STOPWORDS = frozenset(
    {"a", "about", "an", "and", "are", "as", "at", "by", "for", "from", "in", "is", "it", "like", "of", "on", "or"}
    | {"self", "test", "testing", "tests", "that", "the", "this", "to", "with"}
)


@dataclass(frozen=True)
class Match:
    node_id: str
    score: float
    summary: str


def tokens(text: str) -> list[str]:
    """Lower-case words, identifiers split on `_`, `.` and camelCase: `test_view_as_real` -> view, as, real."""
    return [w.lower() for w in _WORD.findall(text) if w.lower() not in STOPWORDS]


def document(test: dict) -> list[str]:
    """The words one test is found by."""
    params = test["params"]
    parts: list[str] = [test["name"], test["class_name"], test["node_id"].split("::", 1)[0], test["summary"]]
    parts += test["calls"] + test["features"] + test["decorators"]
    for key in ("ops", "modules"):
        if key in params:
            parts += [params[key]["expr"], params[key]["source"], *params[key]["names"]]
    parts += params.get("dtypes", [])
    return tokens(" ".join(parts))


def rank(tests: Iterable[dict], query: list[str], limit: int, exclude: str | None = None) -> list[Match]:
    """The `limit` best-scoring tests for `query` (scores > 0), ties broken by node id: deterministic."""
    rows = [t for t in tests]
    if not rows or not query:
        return []
    retriever = bm25s.BM25()
    retriever.index([document(t) or ["<empty>"] for t in rows], show_progress=False)
    scores = retriever.get_scores(query)
    ranked = sorted(
        (
            (round(float(score), 4), row["node_id"], row["summary"])
            for score, row in zip(scores, rows, strict=True)
            if score > 0 and row["node_id"] != exclude
        ),
        key=lambda item: (-item[0], item[1]),
    )
    return [Match(node, score, text) for score, node, text in ranked[:limit]]
