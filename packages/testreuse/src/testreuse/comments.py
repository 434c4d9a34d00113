"""Reasons written as YAML comments, as torch-spyre's users write them: the comment block directly above an entry and
comments trailing the entry's own lines (`mode: xfail  # Could not run 'aten::scatter.src_out'`)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import yaml

from testreuse.yamlmarks import MarkedDocument

SCHEMA_LINE = "yaml-language-server:"
# YAML's line breaks (libyaml's too): not str.splitlines, which also breaks at form feeds and other controls
LINE_BREAK = re.compile(r"\r\n|[\n\r\x85\u2028\u2029]")
# the token stream only; libyaml's when PyYAML has it, as for parsing
_TOKENS = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def yaml_lines(text: str) -> list[str]:
    """The lines as YAML numbers them (index 0 is line 1)."""
    return LINE_BREAK.split(text)


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


def trailing_comments(text: str, lines: list[str]) -> dict[int, str]:
    """The comment after the content of each 1-based line that has both (stripped of `#` and whitespace, non-empty).

    Content is what the YAML scanner's tokens cover, so a `#` inside a quoted or block scalar is text, never a
    comment; a comment-only line has no content and is left out."""
    content_end: dict[int, int] = {}  # 0-based line -> the column where its last token ends
    try:
        for start, end in _token_spans(text):
            for line in range(start[0], end[0] + 1):
                stop = end[1] if line == end[0] else len(lines[line])
                if stop > (start[1] if line == start[0] else 0):
                    content_end[line] = max(content_end.get(line, 0), stop)
    except yaml.YAMLError:  # the parse already succeeded, so this is never expected: then no trailing comments
        return {}
    found = {}
    for line, column in content_end.items():
        rest = lines[line][column:]
        hash_at = rest.find("#")
        if hash_at >= 0 and not rest[:hash_at].strip():
            comment = rest[hash_at:].lstrip("#").strip()
            if comment:
                found[line + 1] = comment
    return found


def _token_spans(text: str) -> Iterator[tuple[tuple[int, int], tuple[int, int]]]:
    """(line, column) of the start and end of every token that covers text, 0-based."""
    for token in yaml.scan(text, Loader=_TOKENS):
        start, end = token.start_mark, token.end_mark
        if (start.line, start.column) != (end.line, end.column):
            yield (start.line, start.column), (end.line, end.column)


def _last_line(doc: MarkedDocument, path: tuple[str | int, ...], lines: list[str]) -> int:
    """The 1-based line where the entry at `path` ends: a block scalar's end mark sits at the start of the line after
    it, so an end with nothing but indentation before it belongs to the line above."""
    start, end = doc.locate(path), doc.end(path)
    if end is None:
        return start.line
    line = end.line
    if line > start.line and not lines[line - 1][: end.column - 1].strip():
        line -= 1
    return line


def comment_reasons(doc: MarkedDocument, text: str) -> None:
    """Give each `tests` entry without a `reason` the comment block directly above it and the comments trailing its
    own lines, joined in line order with "; ", before the model reads the entry.

    An entry's own lines run from the line its first key starts on to the line its last value ends on; a line it
    shares with the next entry (flow style) is the next entry's, whose content ends that line."""
    suite = doc.data.get("test_suite_config") if isinstance(doc.data, dict) else None
    files = suite.get("files") if isinstance(suite, dict) else None
    lines = yaml_lines(text)
    trailing: dict[int, str] | None = None  # scanned once, and only when some entry needs it
    for i, entry in enumerate(files if isinstance(files, list) else ()):
        tests = entry.get("tests") if isinstance(entry, dict) else None
        tests = tests if isinstance(tests, list) else []
        paths = [("test_suite_config", "files", i, "tests", j) for j in range(len(tests))]
        firsts = [doc.locate(path).line for path in paths]
        for j, (rule, path) in enumerate(zip(tests, paths, strict=True)):
            if not isinstance(rule, dict) or _has_reason(rule):
                continue
            first, last = firsts[j], _last_line(doc, path, lines)
            if j + 1 < len(firsts) and first <= firsts[j + 1] <= last:
                last = firsts[j + 1] - 1
            own = range(first, last + 1)
            parts = [comment_above(lines, first)]
            if any("#" in lines[n - 1] for n in own):
                trailing = trailing_comments(text, lines) if trailing is None else trailing
                parts += [trailing[n] for n in own if n in trailing]
            reason = "; ".join(part for part in parts if part)
            if reason:
                rule["reason"] = reason


def _has_reason(rule: dict) -> bool:
    """A `reason` the model reads as one: missing, null and blank are none (a wrong type is the model's to refuse)."""
    reason = rule.get("reason")
    return reason is not None and not (isinstance(reason, str) and not reason.strip())
