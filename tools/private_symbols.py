"""Private torch and pytest symbols used outside a package's guarded modules, as `path:line: symbol` lines.

A torch upgrade moves private symbols without notice; each package keeps the ones it needs in one guarded module per
library (`torchbridge.py` / `torchprivate.py`, `pytestbridge.py`), whose own test names any symbol that moved. A use
anywhere else escapes that test. Found from the syntax tree of each source file:

- an import of a private module (`torch._prims_common`, `_pytest.nodes`) or of a private name from torch or pytest;
- a private component in a chain rooted at torch or pytest (`torch._C._VariableFunctions`, `torch.utils._pytree`);
- a private attribute of any other object (`op._schema`, `item._request`) that the package itself never defines, so
  it belongs to someone else: torch or pytest, as the package imports no other library's objects privately.

Exit status 1 when any is found. Usage: `python tools/private_symbols.py [PACKAGE_SRC ...]` (default: every
`packages/*/src`).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARIES = ("torch", "pytest", "_pytest")
#: The guarded modules: the only places a private symbol may be used (torch's, and testreuse's pytest bridge).
GUARDED = frozenset(
    {
        "packages/simulator/src/ringsim/torchbridge.py",
        "packages/compiler/src/ring_inductor/torchprivate.py",
        "packages/selector/src/testselect/torchprivate.py",
        # run by path in the interpreter of the torch it describes, where testselect is not installed
        "packages/selector/src/testselect/upgrade/dump_core.py",
        "packages/testreuse/src/testreuse/torchbridge.py",
        "packages/testreuse/src/testreuse/pytestbridge.py",
    }
)
#: Folders of upstream files kept as they are (testreuse's embedded test tree): not the package's code.
VENDORED = frozenset({"upstream"})
#: Names public by contract although they start with an underscore (namedtuple's API, enum's hooks).
CONVENTIONAL = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults", "_missing_", "_value_"})


def private(name: str) -> bool:
    """`_pytree` or `_C`; not a dunder (`__version__`) nor one of the CONVENTIONAL names."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__")) and name not in CONVENTIONAL


def _library(module: str) -> bool:
    return module.split(".", 1)[0] in LIBRARIES


def _dotted(node: ast.expr) -> list[str] | None:
    """`torch.utils._pytree` as its names, or None when the chain does not start with a name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def defined_names(trees: list[ast.Module]) -> set[str]:
    """Every private name a package defines itself: functions, classes, assigned names and attributes, parameters."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, ast.keyword) and node.arg:
                names.add(node.arg)
    return {n for n in names if private(n)}


def _aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names a module binds to torch or pytest modules and objects, and those it binds to other modules."""
    library: set[str] = set()
    other: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                (library if _library(alias.name) else other).add(bound)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                (library if _library(node.module) else other).add(alias.asname or alias.name)
    return library, other


def _imported(node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The private torch or pytest modules and names an import statement binds."""
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names if _library(a.name) and any(map(private, a.name.split("."))))
    elif node.module and node.level == 0 and _library(node.module):
        for alias in node.names:
            if any(map(private, [*node.module.split("."), alias.name])):
                yield f"{node.module}.{alias.name}"


def _foreign(name: str, receiver: ast.expr, own: set[str], other: set[str]) -> bool:
    """Whether the private `name` read from `receiver` is someone else's: not the package's own, not an attribute of
    `self`/`cls` or of another library's module."""
    chain = _dotted(receiver)
    return private(name) and name not in own and not (chain and chain[0] in other | {"self", "cls"})


def uses(tree: ast.Module, own: set[str]) -> Iterator[tuple[int, str]]:
    """(line, symbol) of each private torch or pytest symbol the module uses."""
    library, other = _aliases(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield from ((node.lineno, name) for name in _imported(node))
        elif isinstance(node, ast.Attribute) and private(node.attr):
            chain = _dotted(node)
            if (chain and chain[0] in library) or _foreign(node.attr, node.value, own, other):
                yield node.lineno, ".".join(chain) if chain else f"<expression>.{node.attr}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            name = node.args[1] if len(node.args) >= 2 else None
            literal = isinstance(name, ast.Constant) and isinstance(name.value, str)
            if literal and _foreign(name.value, node.args[0], own, other):
                yield node.lineno, f"{node.func.id}(..., {name.value!r})"


def violations(src: Path, guarded: frozenset[Path]) -> list[str]:
    """`path:line: symbol` for each private symbol used under `src` outside the `guarded` files."""
    files = sorted(p for p in src.resolve().rglob("*.py") if not VENDORED.intersection(p.parts))
    trees = {path: ast.parse(path.read_text(encoding="utf-8"), str(path)) for path in files}
    own = defined_names(list(trees.values()))
    found = []
    for path, tree in trees.items():
        if path in {g.resolve() for g in guarded}:
            continue
        for line, symbol in sorted(set(uses(tree, own))):
            found.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line}: {symbol}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("src", nargs="*", type=Path, help="package source folders (default: every packages/*/src)")
    args = parser.parse_args(argv)
    guarded = frozenset(ROOT / path for path in GUARDED)
    found = [v for src in args.src or sorted(ROOT.glob("packages/*/src")) for v in violations(src, guarded)]
    print("\n".join(found) if found else "no private torch or pytest symbol outside the guarded modules")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
