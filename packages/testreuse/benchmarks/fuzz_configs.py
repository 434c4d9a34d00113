"""Fuzz `testreuse validate` in-process and count tracebacks: any exception but the tool's own ConfigError.

Three sources, one seed: configs generated from the JSON Schema (mostly valid, with a wrong value, a
missing required key or an unknown key here and there, values drawn from real test, op and dtype names); the real
configs mutated as text (lines dropped, duplicated, re-indented, YAML syntax, anchors and aliases, bytes that are not
UTF-8) and as data (a node deleted, retyped or duplicated); and the embedded upstream test files mutated as Python
(lines dropped, names changed, deep nesting, self-inheritance, null bytes), each checked by the real config for it.
Capability commands are never run (`validate` runs them only when asked). The goal is 0 tracebacks; the exit code
is 1 when there is any.

    python benchmarks/fuzz_configs.py [--count 10000] [--seed 0] [--configs ../../configs] [--save DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import testreuse
import yaml
from testreuse.errors import ConfigError
from testreuse.schema import config_schema_text
from testreuse.upstream import generic_tests
from testreuse.validate import validate

PACKAGE = Path(testreuse.__file__).resolve().parent
EMBEDDED = PACKAGE / "upstream"
DEFAULT_CONFIGS = EMBEDDED / "configs"
SHOWN = 5
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

DTYPES = ["float32", "bfloat16", "float16", "int64", "bool", "complex64", "flaot32", "float", "dtype", ""]
OPS = ["add", "mul", "div.floor_rounding", "sum", "nn.functional.relu", "_to_copy", "addd", ""]
MODULES = ["nn.Linear", "nn.GRU", "nn.Conv2d", "NoSuchModule", ""]
PATHS = [
    "${TORCH_ROOT}/test/test_ops.py", "${TORCH_ROOT}/test/test_*.py", "${TORCH_ROOT}/test/**/*.py", "${HOME}/x.py",
    "${TORCH_ROOT", "test_ops.py", "/", "..", "${TORCH_ROOT}/test/missing.py", "[", "*",
]  # fmt: skip
WEIRD = [
    "(", "[a-", "\\", "*", ".*", "::", "A::", "::b", "%", "&", "!!binary", "\t", "~", "null", "0x1", "1e999", "-.inf",
    ".nan", "\u2028", "\ud7ff", "é", "a" * 300,
]  # fmt: skip
TEXT_SNIPPETS = [
    "&a [*a]", "*undefined", "&x", "? [a, b]\n: c", "!!python/object:os.system", "!!binary aGVsbG8=", "!!set {a}",
    "!!timestamp 2001-12-14", "!!timestamp x", "!!int x", "!!bool maybe", "!!float x",
    "<<: *a", "{", "]", "'", '"\\x', "\t", "---\n", "...\n", "%YAML 1.1\n", "- - - -",
    "[" * 200, "{a: " * 120, "\ufeff", "\x00", "\x85", "@",
]  # fmt: skip


class SchemaGrammar:
    """Instances of the config schema: each node valid with probability 1 - `error`, else wrong in one way."""

    def __init__(self, schema: dict[str, Any], rng: random.Random, tests: list[str], error: float = 0.04) -> None:
        self.defs = schema["$defs"]
        self.root = schema
        self.rng = rng
        self.tests = tests
        self.error = error

    def document(self) -> Any:
        return self.value(self.root, "", 0)

    def value(self, node: dict[str, Any], key: str, depth: int) -> Any:
        rng = self.rng
        if "$ref" in node:
            return self.value(self.defs[node["$ref"].rsplit("/", 1)[1]], key, depth)
        if rng.random() < self.error or depth > 12:
            return self.wrong(key)
        if "anyOf" in node:
            return self.value(rng.choice(node["anyOf"]), key, depth)
        if "enum" in node:
            return rng.choice(node["enum"])
        kind = node.get("type")
        if kind == "object":
            return self.mapping(node, depth)
        if kind == "array":
            low = node.get("minItems", 0)
            return [self.value(node.get("items", {}), key, depth + 1) for _ in range(rng.randint(low, low + 3))]
        if kind == "string":
            return self.string(key)
        if kind == "number":
            return rng.choice([0.0, 1e-3, 1.5, -1.0, 1e308])
        if kind == "integer":
            return rng.choice([0, 1, 5, -1, 2**70])
        if kind == "boolean":
            return rng.random() < 0.5
        return None

    def mapping(self, node: dict[str, Any], depth: int) -> dict[str, Any]:
        rng = self.rng
        required = set(node.get("required", ()))
        out = {}
        for name, sub in node.get("properties", {}).items():
            if name in required or rng.random() < 0.5:
                out[name] = self.value(sub, name, depth + 1)
        if required and rng.random() < self.error:
            out.pop(rng.choice(sorted(required)), None)
        if rng.random() < self.error:
            out[rng.choice(["bogus", "tags", "description", "names", "mode"])] = self.wrong("")
        return out

    def string(self, key: str) -> str:
        rng = self.rng
        pools = {
            "names": self.tests + [t.split("::")[0] + "::test_.*" for t in self.tests[:20]] + ["TestX::test_y"],
            "name": DTYPES + OPS + MODULES,
            "dtype": DTYPES,
            "op": OPS,
            "path": PATHS,
            "file": ["caps.yaml", "latin1.yaml", "missing.yaml", "/", "deep.yaml"],
            "command": ["no-such-exporter --yaml", "true", "''", "a 'b"],
            "labels": ["trunk", "nightly", "", "a b"],
        }
        pool = pools.get(key, ["reason", "device lacks it", ""])
        return rng.choice(pool) if rng.random() < 0.9 else rng.choice(WEIRD)

    def wrong(self, key: str) -> Any:
        rng = self.rng
        choices: list[Callable[[], Any]] = [
            lambda: None,
            lambda: rng.choice([True, 0, -3, 2.5, float("inf")]),
            lambda: rng.choice(WEIRD),
            lambda: [],
            lambda: {},
            lambda: [rng.choice(WEIRD)],
            lambda: {rng.choice(["name", "x", "1"]): rng.choice(WEIRD)},
            lambda: self.string(key),
        ]
        return rng.choice(choices)()


def mutate_text(text: str, rng: random.Random) -> str:
    """A line- or character-level edit that a hurried human or a broken tool could make."""
    lines = text.splitlines(keepends=True) or ["\n"]
    i = rng.randrange(len(lines))
    edit = rng.randrange(9)
    if edit == 0:
        del lines[i]
    elif edit == 1:
        lines.insert(i, lines[rng.randrange(len(lines))])
    elif edit == 2:
        lines[i] = " " * rng.choice([1, 2, 3, 4, 8]) + lines[i]
    elif edit == 3:
        lines[i] = lines[i].lstrip(" ")
    elif edit == 4:
        at = rng.randrange(len(lines[i]) + 1)
        lines[i] = lines[i][:at] + rng.choice(TEXT_SNIPPETS) + lines[i][at:]
    elif edit == 5:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif edit == 6:
        return "".join(lines)[: rng.randrange(len(text) + 1)]
    elif edit == 7:
        at = rng.randrange(len(lines[i]) + 1)
        lines[i] = lines[i][:at] + rng.choice(WEIRD + DTYPES + OPS) + lines[i][at + rng.randrange(6) :]
    else:
        lines[i] = lines[i].replace(":", rng.choice(["", "::", ": :", ":\t"]), 1)
    return "".join(lines)


def mutate_data(data: Any, rng: random.Random, grammar: SchemaGrammar) -> Any:
    """Replace, delete or duplicate one random node of parsed config data."""
    holders: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in list(children):
            holders.append((node, key))
            walk(child)

    walk(data)
    if not holders:
        return grammar.wrong("")
    node, key = rng.choice(holders)
    edit = rng.randrange(4)
    if edit == 0:
        del node[key]
    elif edit == 1:
        node[key] = grammar.wrong(str(key))
    elif edit == 2 and isinstance(node, list):
        node.insert(key, node[key])
    elif isinstance(node, dict):
        node[rng.choice(["bogus", "only", "edits", "mode", "reason", "global", "names"])] = grammar.wrong("")
    else:
        node[key] = [node[key]]
    return data


def mutate_python(source: str, rng: random.Random) -> bytes:
    """A broken or unusual upstream file: the parser may refuse it, or it may define different tests."""
    lines = source.splitlines(keepends=True)
    i = rng.randrange(len(lines))
    edit = rng.randrange(8)
    if edit == 0:
        del lines[i]
    elif edit == 1:
        lines[i] = lines[i].replace("def test_", "def tset_").replace("class Test", "class Tset")
    elif edit == 2:
        depth = rng.choice([50, 250, 1500])
        lines.insert(i, "x = " + "(" * depth + "1" + ")" * depth + "\n")
    elif edit == 3:
        depth = rng.choice([20, 120, 400])
        lines.insert(i, "".join(" " * k + "if x:\n" for k in range(depth)) + " " * depth + "pass\n")
    elif edit == 4:
        name = f"TestLoop{rng.randrange(3)}"
        lines.append(f"class {name}({name}):\n    def test_a(self): pass\n")
        lines.append(f"class Chain0(Chain{rng.randrange(1, 3)}): pass\nclass Chain1(Chain0): pass\n")
    elif edit == 5:
        chain = rng.choice([10, 120])  # generic_tests is quadratic in a chain's length
        lines += ["class C0:\n    def test_c(self): pass\n"]
        lines += [f"class C{k}(C{k - 1}): pass\n" for k in range(1, chain)]
    elif edit == 6:
        return "".join(lines).encode("utf-8").replace(b"\n", rng.choice([b"\x00\n", b"\xff\n", b"\r"]), 1)
    else:
        lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
    return "".join(lines).encode("utf-8", errors="surrogatepass")


class Fuzzer:
    """Writes each case into a scratch tree and runs `validate` on it, counting what escapes as a traceback."""

    def __init__(self, scratch: Path, configs: dict[str, str], rng: random.Random, save: Path | None) -> None:
        self.scratch = scratch
        self.configs = configs
        self.rng = rng
        self.save = save
        self.root = scratch / "torch_root"
        shutil.copytree(EMBEDDED, self.root)
        self.sources = {p.name: p.read_text(encoding="utf-8") for p in sorted((self.root / "test").glob("*.py"))}
        tests = sorted(t for p in (self.root / "test").glob("*.py") for t in generic_tests(p))
        self.grammar = SchemaGrammar(json.loads(config_schema_text()), rng, tests)
        (scratch / "caps.yaml").write_text("supported_dtypes: [{name: float32}]\nsupported_ops: [{name: add}]\n")
        (scratch / "latin1.yaml").write_bytes(b"supported_dtypes: [{name: caf\xe9}]\n")
        (scratch / "deep.yaml").write_text("[" * 5000 + "]" * 5000)
        self.outcomes: Counter[str] = Counter()
        self.tracebacks: list[tuple[str, str]] = []
        self.case = 0

    def run_case(self, kind: str, config: bytes, upstream: tuple[str, bytes] | None = None) -> None:
        self.case += 1
        path = self.scratch / f"case{self.case}.yaml"
        path.write_bytes(config)
        if upstream is not None:
            target = self.root / "test" / f"fuzz{self.case}" / upstream[0]
            target.parent.mkdir()
            target.write_bytes(upstream[1])
        try:
            validate([path], self.root)
            self.outcomes[f"{kind}: ok"] += 1
        except ConfigError:
            self.outcomes[f"{kind}: error lines"] += 1
        except Exception as exc:  # the point: anything else is a traceback a user would see
            self.outcomes[f"{kind}: TRACEBACK"] += 1
            self.tracebacks.append((kind, summarize(exc)))
            if self.save is not None:
                self.save.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, self.save / path.name)
                if upstream is not None:
                    (self.save / f"case{self.case}-{upstream[0]}").write_bytes(upstream[1])
        finally:
            path.unlink()

    def grammar_case(self) -> None:
        document = self.grammar.document()
        style = self.rng.choice([None, True, False])
        self.run_case("schema grammar", yaml.dump(document, Dumper=DUMPER, default_flow_style=style).encode())

    def text_case(self) -> None:
        text = self.rng.choice(list(self.configs.values()))
        for _ in range(self.rng.randint(1, 3)):
            text = mutate_text(text, self.rng)
        raw = text.encode("utf-8", errors="surrogatepass")
        if self.rng.random() < 0.05:
            raw = raw.replace(b"e", b"\xe9", 1)
        self.run_case("config text mutation", raw)

    def data_case(self) -> None:
        data = yaml.load(self.rng.choice(list(self.configs.values())), Loader=LOADER)
        for _ in range(self.rng.randint(1, 3)):
            data = mutate_data(data, self.rng, self.grammar)
        self.run_case("config data mutation", yaml.dump(data, Dumper=DUMPER, allow_unicode=True).encode())

    def upstream_case(self) -> None:
        name = self.rng.choice(sorted(self.sources))
        mutated = mutate_python(self.sources[name], self.rng)
        config = self.configs.get(name.replace(".py", ".yaml"), "test_suite_config:\n  files: [{path: x}]\n")
        config = config.replace("${TORCH_ROOT}/test/", f"${{TORCH_ROOT}}/test/fuzz{self.case + 1}/")
        self.run_case("upstream mutation", config.encode(), (name, mutated))


def summarize(exc: BaseException) -> str:
    """`Type: first line of the message (at file:line)`, at the deepest frame inside testreuse if there is one."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if str(PACKAGE) in f.filename] or frames
    where = f" (at {Path(ours[-1].filename).name}:{ours[-1].lineno})" if ours else ""
    first = (str(exc).splitlines() or [""])[0][:160]
    return f"{type(exc).__name__}: {first}{where}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000, help="cases in all (default 10000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--configs", type=Path, default=DEFAULT_CONFIGS, help="real configs to mutate")
    parser.add_argument("--save", type=Path, help="copy every input that gave a traceback here")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    configs = {p.name: p.read_text(encoding="utf-8") for p in sorted(args.configs.glob("*.yaml"))}
    if not configs:
        parser.error(f"no *.yaml in {args.configs}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="testreuse-fuzz-") as scratch:
        fuzzer = Fuzzer(Path(scratch), configs, rng, args.save)
        validate([args.configs], fuzzer.root)  # the real configs themselves are valid; also warms op_db
        makers = (
            [fuzzer.grammar_case] * 7 + [fuzzer.text_case] * 6 + [fuzzer.data_case] * 3 + [fuzzer.upstream_case] * 4
        )
        for _ in range(args.count):
            rng.choice(makers)()
    took = time.perf_counter() - started
    print(f"fuzz_configs: {args.count} cases (seed {args.seed}) in {took:.1f} s")
    for outcome, n in sorted(fuzzer.outcomes.items()):
        print(f"  {outcome}: {n}")
    print(f"tracebacks: {len(fuzzer.tracebacks)}")
    for summary, n in Counter(fuzzer.tracebacks).most_common(SHOWN):
        print(f"  {n} x {summary[0]}: {summary[1]}")
    return 1 if fuzzer.tracebacks else 0


if __name__ == "__main__":
    sys.exit(main())
