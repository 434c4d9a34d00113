"""One test file's source -> typed records, by `ast` alone: the upstream files are never imported."""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Mapping
from typing import Any

from testselect.index import features, summary
from testselect.index.dtypes import dtype_names
from testselect.index.records import ClassRecord, FileRecord, ParseError, TestRecord

#: Base classes whose subclasses hold tests, besides any base whose name ends in "TestCase".
TESTCASE_BASES = {"TestCase", "TestBase", "DeviceTypeTestBase"}
DEVICE_INSTANTIATORS = {"instantiate_device_type_tests"}
PARAMETRIZED_INSTANTIATORS = {"instantiate_parametrized_tests"}
#: Decorators that restrict or skip by device, count, size or mode (besides any name starting with only/skip).
RESTRICTIONS = {"deviceCountAtLeast", "largeTensorTest", "slowTest", "serialTest", "expectedFailureMeta"}
DTYPE_DECORATORS = ("dtypes", "dtypesIf")
_RESTRICTION_PREFIXES = ("only", "skip", "expectedFailure", "xfail")


def parse_source(path: str, source: bytes) -> FileRecord:
    """Parse `source` (the bytes of test file `path`); raise ParseError for undecodable or invalid Python."""
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = source[: exc.start].count(b"\n") + 1
        raise ParseError(path, line, f"not UTF-8: {exc.reason}") from None
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise ParseError(path, exc.lineno or 1, f"syntax error: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        raise ParseError(path, 1, f"cannot parse: {type(exc).__name__}: {exc}") from None
    try:
        return _FileParser(path, text, tree).run()
    except RecursionError:
        raise ParseError(path, 1, "cannot parse: nesting too deep") from None


class _FileParser:
    def __init__(self, path: str, text: str, tree: ast.Module) -> None:
        self.path = path
        self.lines = text.splitlines(keepends=True)
        self.tree = tree
        self.assigns: dict[str, ast.expr] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.assigns[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self.assigns[node.target.id] = node.value

    def run(self) -> FileRecord:
        defined = {node.name: node for node in self.tree.body if isinstance(node, ast.ClassDef)}
        instantiations = self._instantiations(defined)
        classes: list[ClassRecord] = []
        tests: dict[str, TestRecord] = {}
        for node in defined.values():
            if not _is_testcase(node, defined, set()):
                continue
            calls = instantiations.get(node.name, [])
            bases = [_text(base) for base in node.bases]
            device_generic = any(c["function"] in DEVICE_INSTANTIATORS for c in calls)
            classes.append(ClassRecord(self.path, node.name, node.lineno, bases, device_generic, calls))
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test"):
                    record = self._test(node.name, bases, item)
                    tests[record.node_id] = record  # a redefinition wins, as in Python
        return FileRecord(self.path, classes, sorted(tests.values(), key=lambda t: t.node_id))

    def _instantiations(self, defined: Mapping[str, ast.ClassDef]) -> dict[str, list[dict[str, Any]]]:
        """Module-level `instantiate_*_tests(Class, ...)` calls and `@instantiate_parametrized_tests` decorators."""
        found: dict[str, list[dict[str, Any]]] = {}
        for node in self.tree.body:
            call = node.value if isinstance(node, ast.Expr) else None
            if not (isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Name)):
                continue
            if _name(call.func) in DEVICE_INSTANTIATORS | PARAMETRIZED_INSTANTIATORS:
                kwargs = {k.arg: _text(k.value) for k in call.keywords if k.arg}
                entry = {"function": _name(call.func), "kwargs": dict(sorted(kwargs.items())), "line": node.lineno}
                found.setdefault(call.args[0].id, []).append(entry)
        for name, node in defined.items():
            for decorator in node.decorator_list:
                if _name(decorator) in PARAMETRIZED_INSTANTIATORS:
                    entry = {"function": _name(decorator), "kwargs": {}, "line": decorator.lineno}
                    found.setdefault(name, []).append(entry)
        return found

    def _test(self, class_name: str, bases: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> TestRecord:
        first = min([d.lineno for d in node.decorator_list] + [node.lineno])
        end = node.end_lineno or node.lineno
        segment = "".join(self.lines[first - 1 : end])
        body = "".join(self.lines[node.lineno - 1 : end])
        decorator_names = [_name(d) for d in node.decorator_list]
        params = self._params(node.decorator_list)
        calls = _calls(node)
        docstring = ast.get_docstring(node) or ""
        comment = self._comment_above(first)
        all_dtypes = set(params.get("dtypes", []))
        for names in params.get("dtypes_if", {}).values():
            all_dtypes.update(names)
        for key in ("ops", "modules"):
            all_dtypes.update(params.get(key, {}).get("dtypes", []))
        return TestRecord(
            node_id=f"{self.path}::{class_name}::{node.name}",
            file=self.path,
            class_name=class_name,
            name=node.name,
            lineno=node.lineno,
            end_lineno=end,
            content_hash=hashlib.sha256(segment.encode("utf-8")).hexdigest(),
            summary=summary.summarize(node.name, docstring, comment, decorator_names, params, calls),
            docstring=docstring,
            decorators=decorator_names,
            params=params,
            features=features.infer(body, all_dtypes, decorator_names, bases),
            calls=calls,
        )

    def _comment_above(self, first: int) -> str:
        """The `#` comment block right above a test's first decorator (the embedded tree documents tests so)."""
        collected: list[str] = []
        index = first - 2
        while index >= 0 and self.lines[index].strip().startswith("#"):
            collected.append(self.lines[index].strip().lstrip("#").strip())
            index -= 1
        return " ".join(reversed(collected))

    def _params(self, decorators: list[ast.expr]) -> dict[str, Any]:
        """The parametrization decorators read statically: op and module lists, dtypes, parametrize, restrictions."""
        params: dict[str, Any] = {}
        for decorator in decorators:
            name = _name(decorator)
            call = decorator if isinstance(decorator, ast.Call) else None
            args = list(call.args) if call else []
            kwargs = {k.arg: k.value for k in call.keywords if k.arg} if call else {}
            if name in ("ops", "modules") and args:
                entry: dict[str, Any] = {"expr": _text(args[0]), "source": self._source(args[0])}
                attribute = "name" if name == "ops" else "module_cls"
                entry["names"] = sorted(self._compared_names(args[0], attribute))
                for key in ("dtypes", "allowed_dtypes"):
                    if key in kwargs:
                        entry[key + "_expr"] = _text(kwargs[key])
                        read, _ = dtype_names([kwargs[key]], self.assigns)
                        if read:
                            entry["dtypes" if key == "dtypes" else "allowed_dtypes"] = read
                if entry.get("allowed_dtypes") and "dtypes" not in entry:
                    entry["dtypes"] = entry["allowed_dtypes"]
                params[name] = entry
            elif name == "dtypes":
                read, exact = dtype_names(args, self.assigns)
                params["dtypes"] = read
                if not exact:
                    params["dtypes_expr"] = ", ".join(_text(a) for a in args)
            elif name.startswith("dtypesIf") and name != "dtypesIf":
                read, _ = dtype_names(args, self.assigns)
                params.setdefault("dtypes_if", {})[name.removeprefix("dtypesIf").lower()] = read
            elif name == "parametrize" and args:
                names = args[0].value if isinstance(args[0], ast.Constant) else _text(args[0])
                values = _text(args[1]) if len(args) > 1 else ""
                params.setdefault("parametrize", []).append({"names": str(names), "values": values})
            elif name in RESTRICTIONS or name.startswith(_RESTRICTION_PREFIXES):
                text = ", ".join([_text(a) for a in args] + [f"{k}={_text(v)}" for k, v in kwargs.items()])
                params.setdefault("restrictions", []).append({"name": name, "args": text})
        return params

    def _source(self, node: ast.expr, depth: int = 0) -> str:
        """The database an op/module list comes from (`op_db`, `binary_ufuncs`), through module-level names."""
        if depth > 8:
            return ""
        if isinstance(node, ast.Name):
            value = self.assigns.get(node.id)
            return self._source(value, depth + 1) if value is not None else node.id
        if isinstance(node, ast.ListComp | ast.GeneratorExp | ast.SetComp):
            return self._source(node.generators[0].iter, depth + 1)
        if isinstance(node, ast.Call) and _name(node.func) in ("filter", "list", "tuple", "sorted") and node.args:
            return self._source(node.args[-1], depth + 1)
        if isinstance(node, ast.BinOp):
            return self._source(node.left, depth + 1)
        return _text(node)

    def _compared_names(self, node: ast.expr, attribute: str, depth: int = 0) -> set[str]:
        """Names statically readable from `x.<attribute> == "a"` / `in {"a", ...}` filters, through module names."""
        found: set[str] = set()
        if depth > 8:
            return found
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in self.assigns:
                found |= self._compared_names(self.assigns[sub.id], attribute, depth + 1)
            if not (isinstance(sub, ast.Compare) and len(sub.ops) == 1 and len(sub.comparators) == 1):
                continue
            left, right = sub.left, sub.comparators[0]
            if not (isinstance(left, ast.Attribute) and left.attr == attribute):
                continue
            if isinstance(sub.ops[0], ast.Eq | ast.In):
                found |= self._constants(right, depth + 1)
        return found

    def _constants(self, node: ast.expr, depth: int) -> set[str]:
        if depth > 8:
            return set()
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.Attribute | ast.Name) and not (isinstance(node, ast.Name) and node.id in self.assigns):
            return {_text(node)} if isinstance(node, ast.Attribute) else set()
        if isinstance(node, ast.Name):
            return self._constants(self.assigns[node.id], depth + 1)
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return set().union(*(self._constants(e, depth + 1) for e in node.elts)) if node.elts else set()
        return set()


def _is_testcase(node: ast.ClassDef, defined: Mapping[str, ast.ClassDef], seen: set[str]) -> bool:
    """A class deriving, directly or through classes of the same file, from a TestCase-like base."""
    for base in node.bases:
        name = _name(base)
        if name.endswith("TestCase") or name in TESTCASE_BASES:
            return True
        inherited = name in defined and name not in seen and name != node.name
        if inherited and _is_testcase(defined[name], defined, seen | {node.name}):
            return True
    return False


def _name(node: ast.expr) -> str:
    """The last name of a decorator or callee: `@unittest.skipIf(...)` -> "skipIf"."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _calls(node: ast.AST) -> list[str]:
    """What a test body calls: `torch.*` and bare functions by dotted name, other methods by name (`view`)."""
    found: set[str] = set()
    body = node.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else [node]
    for sub in (sub for statement in body for sub in ast.walk(statement)):
        if not isinstance(sub, ast.Call):
            continue
        dotted = _dotted(sub.func)
        if dotted is None:
            if isinstance(sub.func, ast.Attribute):
                found.add(sub.func.attr)
            continue
        root = dotted.split(".", 1)[0]
        if root == "self":
            continue
        if root in ("torch", "F", "nn") or "." not in dotted:
            found.add(dotted)
        else:
            found.add(dotted.rsplit(".", 1)[1])
    return sorted(found)


def _text(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except (ValueError, RecursionError, AttributeError):
        return "<unreadable>"
