"""Reasons written as YAML comments: torch-spyre keeps every bucketing reason in a comment directly above its entry."""

from __future__ import annotations

from testreuse.yamlmarks import MarkedDocument

SCHEMA_LINE = "yaml-language-server:"


def comment_above(lines: list[str], line: int) -> str:
    """The comment block directly above 1-based `line` (no blank line between), joined; "" when there is none."""
    block: list[str] = []
    index = line - 2
    while index >= 0 and lines[index].lstrip().startswith("#"):
        text = lines[index].strip().lstrip("#").strip()
        if text.startswith(SCHEMA_LINE):
            break
        block.append(text)
        index -= 1
    return " ".join(t for t in reversed(block) if t)


def comment_reasons(doc: MarkedDocument, text: str) -> None:
    """Give each `tests` entry without a `reason` the comment directly above it, before the model checks reasons."""
    suite = doc.data.get("test_suite_config") if isinstance(doc.data, dict) else None
    files = suite.get("files") if isinstance(suite, dict) else None
    lines = text.splitlines()
    for i, entry in enumerate(files if isinstance(files, list) else ()):
        tests = entry.get("tests") if isinstance(entry, dict) else None
        for j, rule in enumerate(tests if isinstance(tests, list) else ()):
            if not isinstance(rule, dict) or "reason" in rule:
                continue
            where = doc.locate(("test_suite_config", "files", i, "tests", j))
            comment = comment_above(lines, where.line) if where.line else ""
            if comment:
                rule["reason"] = comment
