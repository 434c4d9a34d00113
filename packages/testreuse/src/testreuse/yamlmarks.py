"""YAML parsing that keeps the line and column of every node and rejects duplicate keys.

Hostile input is refused with a located error, never a RecursionError or a hang: nesting is bounded while composing
(PyYAML composes recursively) and while converting (aliases can stack nesting), a node that contains itself through
an alias is refused, and alias expansion has a node budget (nine levels of nine aliases expand to 387 million nodes).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from testreuse.errors import ConfigError, Location, Problem, format_path

Path = tuple[str | int, ...]

MAX_DEPTH = 100
MAX_NODES = 100_000


class MarkedDocument:
    """A parsed YAML document plus the position of every value and mapping key in it, and where each value ends."""

    def __init__(
        self,
        file: str,
        data: Any,
        values: dict[Path, Location],
        keys: dict[Path, Location],
        ends: dict[Path, Location] | None = None,
    ) -> None:
        self.file = file
        self.data = data
        self._values = values
        self._keys = keys
        self._ends = ends or {}

    def locate(self, path: Path, *, key: bool = False) -> Location:
        """The deepest existing node on `path` (a missing field points at its parent mapping)."""
        for end in range(len(path), -1, -1):
            prefix = tuple(path[:end])
            if key and prefix in self._keys:
                return self._keys[prefix]
            if prefix in self._values:
                return self._values[prefix]
        return Location(self.file, 1, 1)

    def end(self, path: Path) -> Location | None:
        """Just past the last character of the value at `path` (for a block collection, the end of its last child);
        None when there is no value there."""
        return self._ends.get(tuple(path))


def _location(file: str, node: yaml.Node) -> Location:
    return Location(file, node.start_mark.line + 1, node.start_mark.column + 1)


try:
    from yaml._yaml import CParser as _EventSource  # libyaml's events: eight times faster on a real config
except ImportError:  # a PyYAML built without libyaml

    class _EventSource(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):  # type: ignore[no-redef]
        def __init__(self, stream: str) -> None:
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)


class _BoundedLoader(Composer, _EventSource, SafeConstructor, Resolver):
    """PyYAML's own safe loading, with a composer that refuses nesting deeper than MAX_DEPTH instead of overflowing
    the stack (libyaml's own composer would recurse in C, unbounded)."""

    def __init__(self, text: str) -> None:
        _EventSource.__init__(self, text)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(None, None, f"nesting deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


class _Walk:
    """State of one conversion: positions found, problems, and the budget that bounds alias expansion."""

    def __init__(self, loader: _BoundedLoader, file: str) -> None:
        self.loader = loader
        self.file = file
        self.values: dict[Path, Location] = {}
        self.keys: dict[Path, Location] = {}
        self.ends: dict[Path, Location] = {}
        self.problems: list[Problem] = []
        self.open: set[int] = set()
        self.nodes = 0


def _refuse(file: str, node: yaml.Node, message: str) -> ConfigError:
    return ConfigError([Problem(_location(file, node), "", f"invalid YAML: {message}")])


def parse_yaml(text: str, file: str) -> MarkedDocument:
    """Parse one YAML document; syntax errors and duplicate keys raise ConfigError with positions."""
    loader = None
    try:
        loader = _BoundedLoader(text)
        node = loader.get_single_node()
        walk = _Walk(loader, file)
        data = _convert(walk, node, ()) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = Location(file, mark.line + 1, mark.column + 1) if mark else Location(file)
        message = " ".join(str(part) for part in (exc.context, exc.problem) if part)
        raise ConfigError([Problem(where, "", f"invalid YAML: {message}")]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([Problem(Location(file), "", f"invalid YAML: {exc}".splitlines()[0])]) from None
    finally:
        if loader is not None:
            loader.dispose()
    if walk.problems:
        raise ConfigError(walk.problems)
    return MarkedDocument(file, data, walk.values, walk.keys, walk.ends)


def _convert(walk: _Walk, node: yaml.Node, path: Path) -> Any:
    walk.nodes += 1
    if walk.nodes > MAX_NODES:
        raise _refuse(walk.file, node, f"more than {MAX_NODES} nodes after alias expansion")
    if len(path) > MAX_DEPTH:
        raise _refuse(walk.file, node, f"nesting deeper than {MAX_DEPTH} levels after alias expansion")
    walk.values[path] = _location(walk.file, node)
    if not isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        walk.ends[path] = _end(walk.file, node)
        return _scalar(walk, node)
    if id(node) in walk.open:
        raise _refuse(walk.file, node, "an alias refers to a node that contains it")
    walk.open.add(id(node))
    try:
        if isinstance(node, yaml.SequenceNode):
            value: Any = [_convert(walk, item, (*path, index)) for index, item in enumerate(node.value)]
            children = [(*path, index) for index in range(len(value))]
        else:
            value = _mapping(walk, node, path)
            children = [(*path, str(key)) for key in value]
    finally:
        walk.open.discard(id(node))
    # a block collection's own end mark is where the next token starts (often the next entry's line): its last child
    # ends it; a flow collection ends at its closing bracket
    ends = [walk.ends[child] for child in children if child in walk.ends]
    walk.ends[path] = _end(walk.file, node) if node.flow_style else max(ends, default=walk.values[path])
    return value


def _end(file: str, node: yaml.Node) -> Location:
    return Location(file, node.end_mark.line + 1, node.end_mark.column + 1)


def _scalar(walk: _Walk, node: yaml.Node) -> Any:
    try:
        return walk.loader.construct_object(node)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
        # PyYAML's constructors for explicitly tagged scalars (`!!int abc`, `!!timestamp x`) raise these unwrapped
        raise _refuse(walk.file, node, f"{node.tag} cannot hold {node.value!r}") from None


def _mapping(walk: _Walk, node: yaml.MappingNode, path: Path) -> dict[Any, Any]:
    result: dict[Any, Any] = {}
    seen: dict[Any, Location] = {}
    for key_node, value_node in node.value:
        here = _location(walk.file, key_node)
        key = _scalar(walk, key_node) if isinstance(key_node, yaml.ScalarNode) else None
        if not isinstance(key, str | int | float | bool):
            walk.problems.append(Problem(here, format_path(path), "mapping keys must be scalars"))
            continue
        if key in seen:
            message = f"duplicate key (first defined at line {seen[key].line})"
            walk.problems.append(Problem(here, format_path((*path, str(key))), message))
            continue
        seen[key] = here
        child = (*path, str(key))
        walk.keys[child] = here
        result[key] = _convert(walk, value_node, child)
    return result
