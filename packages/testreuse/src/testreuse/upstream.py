"""What an upstream test file defines, read from its syntax tree: the file is never imported for this."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def generic_tests(path: Path) -> frozenset[str]:
    """`Class::test` for every test method of every module-level class, including methods inherited in-file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}

    def methods(name: str, seen: frozenset[str]) -> set[str]:
        node = classes[name]
        own = {
            item.name
            for item in node.body
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test")
        }
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in classes and base.id not in seen:
                own |= methods(base.id, seen | {base.id})
        return own

    return frozenset(f"{cls}::{test}" for cls in classes for test in methods(cls, frozenset({cls})))
