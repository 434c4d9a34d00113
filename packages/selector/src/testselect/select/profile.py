"""The backend profile (`configs/backend.yaml`): which extension points the backend hooks and where to look.

Read with PyYAML's composer so every value keeps its line: each problem is one `file:line: field: message`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

# The extension points a profile may declare; each but eager_ops is a feature the index infers per test.
HOOKS = ("eager_ops", "autograd", "complex", "distributed", "dynamo", "inductor", "jit", "multi_device", "sparse")
MODES = ("xfail", "xfail_strict", "skip")


class ProfileError(Exception):
    """A profile that cannot be used; `problems` are the `file:line: field: message` lines."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Profile:
    """What the backend hooks (`hooks`), the dtypes it computes in, and the scope globs (paths under test/)."""

    device: str
    hooks: dict[str, bool]
    dtypes: tuple[str, ...] = ()  # empty: every dtype the capabilities list
    missing_op: str = "xfail_strict"  # the mode of a case that ran an aten op the device lacks
    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = field(default_factory=tuple)
    # aten ops (fnmatch globs) the backend gets outside its capability export: runtime glue (allocation, copies,
    # scalar reads) and torch's own composite and view kernels, which op evidence records but the export omits.
    provided_ops: tuple[str, ...] = field(default_factory=tuple)


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[str] = []

    def error(self, node: yaml.Node, where: str, message: str) -> None:
        self.problems.append(f"{self.path}:{node.start_mark.line + 1}: {where}: {message}")

    def mapping(self, node: yaml.Node, where: str, keys: tuple[str, ...]) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            self.error(node, where, "expected a mapping")
            return {}
        seen: dict[str, yaml.Node] = {}
        for key, _value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else "?"
            path = f"{where}.{name}" if where else name
            if name in seen:
                self.error(key, path, f"duplicate key (first on line {seen[name].start_mark.line + 1})")
            elif name not in keys:
                self.error(key, path, f"unknown field (expected one of: {', '.join(keys)})")
            seen[name] = key
        return {k.value: v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value in keys}

    def scalar(self, node: yaml.Node, where: str, kind: type) -> object | None:
        value = yaml.safe_load(yaml.serialize(node)) if isinstance(node, yaml.ScalarNode) else None
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            self.error(node, where, f"expected {'yes/no' if kind is bool else 'a string'}")
            return None
        return value

    def strings(self, node: yaml.Node, where: str) -> tuple[str, ...]:
        if not isinstance(node, yaml.SequenceNode):
            self.error(node, where, "expected a list of strings")
            return ()
        values = [self.scalar(item, f"{where}[{i}]", str) for i, item in enumerate(node.value)]
        return tuple(v for v in values if isinstance(v, str))


def load_profile(path: Path) -> Profile:
    """Parse and check a profile; ProfileError lists every problem, located."""
    try:
        text = path.read_text(encoding="utf-8")
        root = yaml.compose(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError([f"{path}:1: profile: cannot read ({exc})"]) from None
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 1
        raise ProfileError([f"{path}:{line}: profile: not YAML ({exc.problem})"]) from None
    reader = _Reader(path)
    if root is None:
        raise ProfileError([f"{path}:1: profile: empty file"])
    top = reader.mapping(root, "", ("device", "hooks", "dtypes", "missing_op", "scope", "provided_ops"))
    for required in ("device", "hooks"):
        if required not in top and isinstance(root, yaml.MappingNode):
            reader.error(root, required, "required field missing")
    device = reader.scalar(top["device"], "device", str) if "device" in top else None
    hooks: dict[str, bool] = {}
    if "hooks" in top:
        for name, node in reader.mapping(top["hooks"], "hooks", HOOKS).items():
            value = reader.scalar(node, f"hooks.{name}", bool)
            if isinstance(value, bool):
                hooks[name] = value
    dtypes = reader.strings(top["dtypes"], "dtypes") if "dtypes" in top else ()
    provided = reader.strings(top["provided_ops"], "provided_ops") if "provided_ops" in top else ()
    missing_op = "xfail_strict"
    if "missing_op" in top:
        value = reader.scalar(top["missing_op"], "missing_op", str)
        if isinstance(value, str) and value not in MODES:
            reader.error(top["missing_op"], "missing_op", f"{value!r} is not one of: {', '.join(MODES)}")
        elif isinstance(value, str):
            missing_op = value
    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()
    if "scope" in top:
        scope = reader.mapping(top["scope"], "scope", ("include", "exclude"))
        include = reader.strings(scope["include"], "scope.include") if "include" in scope else include
        exclude = reader.strings(scope["exclude"], "scope.exclude") if "exclude" in scope else exclude
    if reader.problems:
        raise ProfileError(reader.problems)
    return Profile(str(device), hooks, dtypes, missing_op, include, exclude, provided)
