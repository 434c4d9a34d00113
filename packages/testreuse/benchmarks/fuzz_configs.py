"""Fuzz `testreuse validate` and the pytest plugin in-process and count tracebacks from testreuse code.

Three sources, one seed: configs generated from the JSON Schema (mostly valid, with a wrong value, a
missing required key or an unknown key here and there, values drawn from real test, op and dtype names); the real
configs mutated as text (lines dropped, duplicated, re-indented, YAML syntax, anchors and aliases, bytes that are not
UTF-8) and as data (a node deleted, retyped or duplicated); and the embedded upstream test files mutated as Python
(lines dropped, names changed, deep nesting, self-inheritance, null bytes), each checked by the real config for it.
`validate` runs no capability command (it runs them only when asked); the plugin does.

Every case goes to `validate`, where anything but the tool's own ConfigError is a traceback. `--plugin-count` of them,
spread evenly over the run, also go to the plugin: `pytest.main(["--collect-only", "--testreuse-config", CASE, ...])`
in this process on the CPU-fallback test device (tests/backends/fallback_backend.py), against a torch root of its own
that holds only the embedded files and the one mutated file of the case. There a bad input must end as a usage error
(exit 4), pytest's own collection error (exit 2) or a clean collection; a traceback is exit 3 (INTERNALERROR), an
exception escaping pytest.main, or any traceback frame in testreuse's source in the output. A case still running after
`--plugin-timeout` seconds is a hang. After each case the torch state the plugin changes (OpInfo dtypes for the
device, test configs, the device-only switch, wrapped parametrizers) must be as before: the plugin must undo it, so a
difference is counted and reported (then restored, so that later cases start clean). What a fresh process would not
carry over, the harness drops between cases: the upstream modules imported from the scratch tree and their sys.path
entries. A capability command of the real configs is run once and its output replayed (`cat`) by the plugin cases.
Cases where the plugin and validate disagree are counted for information only. The goal is 0 tracebacks (and, for
the plugin, 0 hangs and leaks); the exit code is 1 when there is any.

    python benchmarks/fuzz_configs.py [--count 10000] [--plugin-count 1000] [--plugin-timeout 60] [--seed 0]
                                      [--configs ../../configs] [--save DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Before torch is imported: an installed backend that autoloads (ring) would take privateuse1 from the fallback device.
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

import pytest
import testreuse
import yaml
from testreuse.capabilities import export_argv
from testreuse.errors import ConfigError
from testreuse.schema import config_schema_text
from testreuse.upstream import generic_tests
from testreuse.validate import validate

PACKAGE = Path(testreuse.__file__).resolve().parent
EMBEDDED = PACKAGE / "upstream"
DEFAULT_CONFIGS = EMBEDDED / "configs"
BACKENDS = Path(__file__).resolve().parents[1] / "tests" / "backends"
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

    def __init__(
        self,
        scratch: Path,
        configs: dict[str, str],
        rng: random.Random,
        save: Path | None,
        plugin: PluginFuzzer | None = None,
        plugin_share: tuple[int, int] = (0, 1),
    ) -> None:
        self.scratch = scratch
        self.plugin = plugin
        self.plugin_share = plugin_share  # (plugin cases, all cases): which cases also go to the plugin
        self.took = 0.0
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
        started = time.perf_counter()
        valid = False
        try:
            validate([path], self.root)
            valid = True
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
            self.took += time.perf_counter() - started
            path.unlink()
        share, total = self.plugin_share
        if self.plugin is not None and self.case * share // total > (self.case - 1) * share // total:
            self.plugin.run_case(self.case, kind, config, upstream, valid)

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


class CaseTimeout(BaseException):
    """Raised into a plugin case that runs past --plugin-timeout (a BaseException: little on the way catches it)."""


class PluginFuzzer:
    """Feeds cases to the pytest plugin: `pytest.main(--collect-only ...)` in this process, output captured."""

    def __init__(self, scratch: Path, configs_dir: Path, timeout: float, save: Path | None) -> None:
        self.scratch = scratch  # case configs go here, beside the capability files the grammar names
        self.root = scratch / "plugin_torch_root"  # its own tree: a mutated file lives there for its case only
        shutil.copytree(EMBEDDED, self.root)
        self.ini = scratch / "plugin-pytest.ini"  # no ini or conftest of the repository takes part
        self.ini.write_text("[pytest]\naddopts = --strict-markers\n")
        self.timeout = timeout
        self.save = save
        self.replays = self.record_commands(configs_dir)
        self.outcomes: Counter[str] = Counter()
        self.tracebacks: list[tuple[str, str]] = []
        self.hangs: list[tuple[str, str]] = []
        self.leaks: list[tuple[str, str]] = []
        self.disagreements: Counter[str] = Counter()
        self.cases = 0
        self.took = 0.0
        self.baseline: dict[str, Any] = {}

    def record_commands(self, configs_dir: Path) -> list[tuple[bytes, bytes]]:
        """Run each capability command of the real configs once; cases replay its output with `cat`."""
        replays = []
        for k, path in enumerate(sorted(configs_dir.glob("*.yaml"))):
            data = yaml.load(path.read_text(encoding="utf-8"), Loader=LOADER)
            source = ((data or {}).get("test_suite_config") or {}).get("global", {}).get("capabilities") or {}
            command = source.get("command")
            if not command:
                continue
            done = subprocess.run(export_argv(command), capture_output=True, cwd=configs_dir, check=True, timeout=300)
            export = self.scratch / f"export{k}.yaml"
            export.write_bytes(done.stdout)
            replays.append((command.encode(), f"cat {shlex.quote(str(export))}".encode()))
        return replays

    def pytest_main(self, config: Path) -> tuple[int | None, str, BaseException | None]:
        argv = [
            "--collect-only", "-q", "-p", "no:cacheprovider", "-c", str(self.ini), "--rootdir", str(self.scratch),
            "--testreuse-config", str(config), "--torch-root", str(self.root),
            "--testreuse-backend", "fallback_backend:load", "--testreuse-device", "fallbackdev",
        ]  # fmt: skip
        out = io.StringIO()
        saved_path = list(sys.path)
        code: int | None = None
        escaped: BaseException | None = None

        expired: list[CaseTimeout] = []

        def expire(signum: int, frame: Any) -> None:
            expired.append(CaseTimeout(f"still running after {self.timeout} s"))
            raise expired[-1]

        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, self.timeout)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                code = int(pytest.main(argv))
        except BaseException as exc:  # the point: whatever escapes pytest.main is a traceback (or a hang)
            escaped = exc
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            # What a fresh pytest process would not carry over: upstream modules of this tree and their sys.path.
            sys.path[:] = saved_path
            for name, module in list(sys.modules.items()):
                if str(getattr(module, "__file__", None) or "").startswith(str(self.scratch)):
                    del sys.modules[name]
        return code, out.getvalue(), expired[0] if expired else escaped  # pytest may have caught the timeout

    def warm_up(self, configs_dir: Path) -> None:
        """The real configs through the plugin: they must collect cleanly (this also imports what collection needs)."""
        config = self.scratch / "real-configs"
        config.mkdir()
        for path in sorted(configs_dir.glob("*.yaml")):
            (config / path.name).write_bytes(self.replay(path.read_bytes()))
        code, output, escaped = self.pytest_main(config)
        if code != 0 or escaped is not None:
            tail = "\n".join(output.splitlines()[-20:])
            raise SystemExit(f"the real configs do not collect through the plugin (exit {code}, {escaped!r}):\n{tail}")
        self.baseline = torch_state()

    def replay(self, config: bytes) -> bytes:
        for command, replacement in self.replays:
            config = config.replace(command, replacement)
        return config

    def run_case(
        self, case: int, kind: str, config: bytes, upstream: tuple[str, bytes] | None, valid: bool = True
    ) -> None:
        self.cases += 1
        path = self.scratch / f"plugin-case{case}.yaml"
        path.write_bytes(self.replay(config))
        target = self.root / "test" / f"fuzz{case}" / upstream[0] if upstream is not None else None
        if target is not None and upstream is not None:
            target.parent.mkdir()
            target.write_bytes(upstream[1])
        started = time.perf_counter()
        try:
            code, output, escaped = self.pytest_main(path)
        finally:
            self.took += time.perf_counter() - started
            path.unlink()
            if target is not None:
                shutil.rmtree(target.parent)
        problem = None
        if isinstance(escaped, CaseTimeout):
            self.outcomes[f"{kind}: HANG"] += 1
            self.hangs.append((kind, f"still running after {self.timeout} s"))
            problem = "hang"
        elif escaped is not None:
            self.outcomes[f"{kind}: TRACEBACK (escaped pytest.main)"] += 1
            self.tracebacks.append((kind, summarize(escaped)))
            problem = "traceback"
        elif code == pytest.ExitCode.INTERNAL_ERROR or ours_in_output(output):
            self.outcomes[f"{kind}: TRACEBACK (exit {code})"] += 1
            self.tracebacks.append((kind, summarize_output(output)))
            problem = "traceback"
        else:
            outcome = EXIT_NAMES.get(code, f"exit {code}")
            self.outcomes[f"{kind}: {outcome}"] += 1
            # Not a failure: the plugin runs capability commands and checks names against collection, and pytest
            # reports an upstream file that validate refuses as its own collection error.
            if valid == (outcome == "usage error") and (valid or outcome != "collection error"):
                verdict = "validate passed, plugin refused" if valid else "validate refused, plugin did not"
                self.disagreements[f"{kind}: {verdict}"] += 1
                problem = "disagreement"
        changed = diff_state(self.baseline, torch_state())
        if changed:
            self.leaks.append((kind, changed))
            restore_state(self.baseline)
            problem = problem or "leak"
        if problem is not None and self.save is not None:
            self.save.mkdir(parents=True, exist_ok=True)
            (self.save / f"plugin-case{case}-{problem}.yaml").write_bytes(config)
            (self.save / f"plugin-case{case}-{problem}.out").write_text(output, encoding="utf-8", errors="replace")
            if upstream is not None:
                (self.save / f"plugin-case{case}-{upstream[0]}").write_bytes(upstream[1])


EXIT_NAMES = {
    int(pytest.ExitCode.OK): "collected",
    int(pytest.ExitCode.INTERRUPTED): "collection error",
    int(pytest.ExitCode.USAGE_ERROR): "usage error",
    int(pytest.ExitCode.NO_TESTS_COLLECTED): "nothing collected",
}
# A frame in testreuse's own source, as Python prints it (`File "...", line N`) or as pytest does (`...:N: in f`);
# pytest writes a path relative to the directory it was started in when that is shorter.
SOURCES = "|".join(re.escape(p) for p in sorted({str(PACKAGE), os.path.relpath(PACKAGE)}, key=len, reverse=True))
OUR_FRAME = re.compile(rf'(?<![\w./-])(?P<file>(?:{SOURCES})/[^\s":]+\.py)(?:", line (?P<a>\d+)|:(?P<b>\d+): in )')
RAISED = re.compile(r"(?:INTERNALERROR> |E +)?(?P<line>[A-Za-z_.]*(?:Error|Exception|Interrupt|Exit)\b.*)")


def ours_in_output(output: str) -> bool:
    return "INTERNALERROR" in output or OUR_FRAME.search(output) is not None


def summarize_output(output: str) -> str:
    """`last exception line (at file:line)`, the frame being the deepest one in testreuse's source."""
    frames = list(OUR_FRAME.finditer(output))
    last = frames[-1] if frames else None
    where = f" (at {Path(last['file']).name}:{last['a'] or last['b']})" if last else ""
    raised = [m["line"] for m in map(RAISED.match, output.splitlines()) if m]
    return f"{(raised or ['(no exception line)'])[-1][:160]}{where}"


def torch_state() -> dict[str, Any]:
    """What a plugin session changes in torch and must put back when it ends."""
    from testreuse import torchbridge
    from torch.testing._internal import common_device_type as cdt
    from torch.testing._internal.common_modules import modules

    base = cdt.PrivateUse1TestBase
    return {
        "dtypesIf": {id(op): (op, dict(op.dtypesIf)) for op in torchbridge.op_db()},
        "env": os.environ.get(torchbridge.ONLY_FOR_KEY),
        "_get_dtypes": vars(base).get("_get_dtypes"),
        "test configs": (base.op_overrides, base.op_allowlist, base.test_exclusions),
        "ops._parametrize_test": cdt.ops._parametrize_test,
        "modules._parametrize_test": modules._parametrize_test,
    }


def diff_state(before: dict[str, Any], after: dict[str, Any]) -> str:
    changed = [key for key in before if key != "dtypesIf" and before[key] != after[key]]
    ops = [op.full_name for key, (op, dtypes) in before["dtypesIf"].items() if after["dtypesIf"][key][1] != dtypes]
    if ops:
        changed.insert(0, f"dtypesIf of {len(ops)} OpInfos (e.g. {ops[0]})")
    return ", ".join(changed)


def restore_state(before: dict[str, Any]) -> None:
    from testreuse import torchbridge
    from torch.testing._internal import common_device_type as cdt
    from torch.testing._internal.common_modules import modules

    for op, dtypes in before["dtypesIf"].values():
        op.dtypesIf.clear()
        op.dtypesIf.update(dtypes)
    os.environ.pop(torchbridge.ONLY_FOR_KEY, None)
    if before["env"] is not None:
        os.environ[torchbridge.ONLY_FOR_KEY] = before["env"]
    base = cdt.PrivateUse1TestBase
    if "_get_dtypes" in vars(base) and before["_get_dtypes"] is None:
        del base._get_dtypes
    base.op_overrides, base.op_allowlist, base.test_exclusions = before["test configs"]
    cdt.ops._parametrize_test = before["ops._parametrize_test"]
    modules._parametrize_test = before["modules._parametrize_test"]


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
    parser.add_argument(
        "--plugin-count", type=int, default=1000, help="how many of them also go to the plugin (default 1000; 0: none)"
    )
    parser.add_argument("--plugin-timeout", type=float, default=60.0, help="seconds before a plugin case is a hang")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--configs", type=Path, default=DEFAULT_CONFIGS, help="real configs to mutate")
    parser.add_argument(
        "--save", type=Path, help="copy every input that gave a traceback (plugin: or a hang, leak, disagreement) here"
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)
    configs = {p.name: p.read_text(encoding="utf-8") for p in sorted(args.configs.glob("*.yaml"))}
    if not configs:
        parser.error(f"no *.yaml in {args.configs}")
    plugin_count = max(0, min(args.plugin_count, args.count))
    if plugin_count:
        sys.path.insert(0, str(BACKENDS))
        import fallback_backend  # the device must exist before torch.testing._internal is imported

        fallback_backend.load()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="testreuse-fuzz-") as scratch:
        plugin = None
        if plugin_count:
            plugin = PluginFuzzer(Path(scratch), args.configs, args.plugin_timeout, args.save)
        fuzzer = Fuzzer(Path(scratch), configs, rng, args.save, plugin, (plugin_count, args.count))
        validate([args.configs], fuzzer.root)  # the real configs themselves are valid; also warms op_db
        if plugin is not None:
            plugin.warm_up(args.configs)
        gc.freeze()  # torch's heap is out of the collector's way: pytest runs gc.collect() at the end of each session
        makers = (
            [fuzzer.grammar_case] * 7 + [fuzzer.text_case] * 6 + [fuzzer.data_case] * 3 + [fuzzer.upstream_case] * 4
        )
        for _ in range(args.count):
            rng.choice(makers)()
    took = time.perf_counter() - started
    print(f"fuzz_configs: {args.count} cases (seed {args.seed}) in {took:.1f} s")
    print(f"validate: {args.count} cases in {fuzzer.took:.1f} s")
    for outcome, n in sorted(fuzzer.outcomes.items()):
        print(f"  {outcome}: {n}")
    print(f"tracebacks: {len(fuzzer.tracebacks)}")
    for summary, n in Counter(fuzzer.tracebacks).most_common(SHOWN):
        print(f"  {n} x {summary[0]}: {summary[1]}")
    failed = bool(fuzzer.tracebacks)
    if plugin is not None:
        each = 1000 * plugin.took / max(plugin.cases, 1)
        print(f"plugin: {plugin.cases} cases in {plugin.took:.1f} s ({each:.0f} ms a case)")
        for outcome, n in sorted(plugin.outcomes.items()):
            print(f"  {outcome}: {n}")
        for label, found in (
            ("tracebacks", plugin.tracebacks),
            ("hangs", plugin.hangs),
            ("torch state left changed", plugin.leaks),
        ):
            print(f"plugin {label}: {len(found)}")
            for summary, n in Counter(found).most_common(SHOWN):
                print(f"  {n} x {summary[0]}: {summary[1]}")
            failed = failed or bool(found)
        print(f"plugin and validate disagree (for information): {sum(plugin.disagreements.values())}")
        for outcome, n in sorted(plugin.disagreements.items()):
            print(f"  {outcome}: {n}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
