"""Dtype names read statically from `@dtypes(...)`-style arguments, so no torch import is needed to index."""

from __future__ import annotations

import ast
from collections.abc import Mapping

#: torch's dtype aliases, to one canonical name each (torch.half is float16, torch.double float64, ...).
ALIASES = {
    "half": "float16",
    "float": "float32",
    "double": "float64",
    "cfloat": "complex64",
    "cdouble": "complex128",
    "chalf": "complex32",
    "short": "int16",
    "int": "int32",
    "long": "int64",
}
DTYPES = {
    "bool",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex32",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
}
_FLOATING = ("float32", "float64")
_INTEGRAL = ("uint8", "int8", "int16", "int32", "int64")
_COMPLEX = ("complex64", "complex128")
#: torch.testing._internal.common_dtype's helpers: the fixed dtypes each returns before its `*_and(...)` extras.
HELPERS = {
    "floating_types": _FLOATING,
    "floating_types_and": _FLOATING,
    "floating_and_complex_types": _FLOATING + _COMPLEX,
    "floating_and_complex_types_and": _FLOATING + _COMPLEX,
    "double_types": ("float64", "complex128"),
    "integral_types": _INTEGRAL,
    "integral_types_and": _INTEGRAL,
    "all_types": _FLOATING + _INTEGRAL,
    "all_types_and": _FLOATING + _INTEGRAL,
    "complex_types": _COMPLEX,
    "complex_types_and": _COMPLEX,
    "all_types_and_complex": _FLOATING + _INTEGRAL + _COMPLEX,
    "all_types_and_complex_and": _FLOATING + _INTEGRAL + _COMPLEX,
    "empty_types": (),
    "custom_types": (),
}
_MAX_DEPTH = 8


def dtype_name(node: ast.expr) -> str | None:
    """`torch.float32` / `torch.half` -> the canonical name; anything else -> None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        name = ALIASES.get(node.attr, node.attr)
        return name if name in DTYPES else None
    return None


def dtype_names(nodes: list[ast.expr], assigns: Mapping[str, ast.expr]) -> tuple[list[str], bool]:
    """The dtypes a decorator's arguments name, and whether every argument could be read statically."""
    found: list[str] = []
    exact = True

    def visit(node: ast.expr, depth: int) -> None:
        nonlocal exact
        if depth > _MAX_DEPTH:
            exact = False
            return
        name = dtype_name(node)
        if name is not None:
            found.append(name)
        elif isinstance(node, ast.Starred):
            visit(node.value, depth + 1)
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            for element in node.elts:
                visit(element, depth + 1)
        elif isinstance(node, ast.Name) and node.id in assigns:
            visit(assigns[node.id], depth + 1)
        elif isinstance(node, ast.Call) and _callee(node) in HELPERS:
            found.extend(HELPERS[_callee(node)])
            for arg in node.args:
                visit(arg, depth + 1)
        elif isinstance(node, ast.Constant) and node.value is None:
            return
        else:
            exact = False

    for node in nodes:
        visit(node, 0)
    return sorted(set(found)), exact


def _callee(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""
