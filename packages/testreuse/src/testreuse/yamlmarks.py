"""YAML parsing that keeps the line and column of every node and rejects duplicate keys."""

from __future__ import annotations

from typing import Any

import yaml

from testreuse.errors import ConfigError, Location, Problem, format_path

Path = tuple[str | int, ...]


class MarkedDocument:
    """A parsed YAML document plus the position of every value and mapping key in it."""

    def __init__(self, file: str, data: Any, values: dict[Path, Location], keys: dict[Path, Location]) -> None:
        self.file = file
        self.data = data
        self._values = values
        self._keys = keys

    def locate(self, path: Path, *, key: bool = False) -> Location:
        """The deepest existing node on `path` (a missing field points at its parent mapping)."""
        for end in range(len(path), -1, -1):
            prefix = tuple(path[:end])
            if key and prefix in self._keys:
                return self._keys[prefix]
            if prefix in self._values:
                return self._values[prefix]
        return Location(self.file, 1, 1)


def _location(file: str, node: yaml.Node) -> Location:
    return Location(file, node.start_mark.line + 1, node.start_mark.column + 1)


def parse_yaml(text: str, file: str) -> MarkedDocument:
    """Parse one YAML document; syntax errors and duplicate keys raise ConfigError with positions."""
    loader = None
    try:
        loader = yaml.SafeLoader(text)
        node = loader.get_single_node()
        values: dict[Path, Location] = {}
        keys: dict[Path, Location] = {}
        problems: list[Problem] = []
        data = _convert(loader, node, (), file, values, keys, problems) if node is not None else None
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
    if problems:
        raise ConfigError(problems)
    return MarkedDocument(file, data, values, keys)


def _convert(
    loader: yaml.SafeLoader,
    node: yaml.Node,
    path: Path,
    file: str,
    values: dict[Path, Location],
    keys: dict[Path, Location],
    problems: list[Problem],
) -> Any:
    values[path] = _location(file, node)
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        seen: dict[Any, Location] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool) or key is None:
                problems.append(Problem(_location(file, key_node), format_path(path), "mapping keys must be scalars"))
                continue
            here = _location(file, key_node)
            if key in seen:
                first = seen[key]
                problems.append(
                    Problem(here, format_path((*path, str(key))), f"duplicate key (first defined at line {first.line})")
                )
                continue
            seen[key] = here
            child = (*path, str(key))
            keys[child] = here
            result[key] = _convert(loader, value_node, child, file, values, keys, problems)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [
            _convert(loader, item, (*path, index), file, values, keys, problems)
            for index, item in enumerate(node.value)
        ]
    return loader.construct_object(node, deep=True)
