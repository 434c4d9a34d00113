"""The LLM reasoner through `testselect select` against a real local OpenAI-compatible server scripted per test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import toytree
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from testselect.cli import main
from testselect.evidence import store as evidence
from testselect.index.build import index_tree
from testselect.index.store import Store
from testselect.select.capabilities import Capabilities
from testselect.select.llm.prompt import MODES
from testselect.select.llm.validate import dtypes_of, named_facts, validate
from testselect.select.profile import Profile
from testselect.select.reasoner import CaseFacts, RuleReasoner
from testselect.select.reasoner import TestFacts as Facts

# The selection tests' toy tree, its last test named for the CPU crash this module records for it.
TOY = toytree.TOY.replace("def test_some_lack(", "def test_crash(")

PROFILE = "device: toy\nhooks:\n  eager_ops: yes\n  autograd: no\ndtypes: [float32, float64]\n"
CAPS = """\
device: toy
supported_dtypes: [{name: float32}]
aten_ops:
  - {name: "aten::add.Tensor", dtypes: [{name: float32}]}
  - {name: "aten::ones", dtypes: [{name: float32}]}
"""
CASES = [  # (case, test, outcome, ops)
    ("test_add_cpu_float32", "test_add", "passed", {"aten::add.Tensor": ["float32"], "aten::ones": ["float32"]}),
    ("test_lacks_cpu_float32", "test_lacks", "passed", {"aten::cumsum": ["float32"]}),
    ("test_crash_cpu_float32", "test_crash", "crashed", {}),
]
T = "test_toy.py::TestToy::"
KEY = "sk-test-0123456789abcdef"


class Scripted(ThreadingHTTPServer):
    """An OpenAI-compatible `/v1/chat/completions` that answers from a script (the last reply repeats)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.script: list[tuple[int, dict[str, str], bytes]] = []
        self.requests: list[dict] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1"

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that timed out has closed the socket the reply goes to


class Handler(BaseHTTPRequestHandler):
    server: Scripted

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests.append(
            {
                "path": self.path,
                "headers": dict(self.headers),
                "raw": body,
                "body": json.loads(body),
                "at": time.monotonic(),
            }
        )
        status, headers, reply = self.server.script.pop(0) if len(self.server.script) > 1 else self.server.script[0]
        time.sleep(float(headers.get("X-Delay", 0)))  # a slow endpoint, for the timeout
        if self.path != "/v1/chat/completions":
            status, headers, reply = 404, {}, b"{}"
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet: the test reads `requests`


def chat(content: str) -> tuple[int, dict[str, str], bytes]:
    """A 200 chat completion whose assistant message is `content`."""
    message = {"role": "assistant", "content": content}
    body = {"object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    return 200, {}, json.dumps(body).encode()


def decisions(*items: dict) -> tuple[int, dict[str, str], bytes]:
    return chat(json.dumps({"decisions": list(items)}))


@pytest.fixture
def server() -> Iterator[Scripted]:
    srv = Scripted()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def toy(tmp_path: Path) -> dict[str, Path]:
    """An indexed test_toy.py with CPU cases for three tests, the profile, the export and an output dir."""
    (tmp_path / "torch" / "test").mkdir(parents=True)
    (tmp_path / "torch" / "test" / "test_toy.py").write_text(textwrap.dedent(TOY), encoding="utf-8")
    store = Store.open(tmp_path / "s.sqlite")
    index_tree(tmp_path / "torch", store)
    evidence.ensure(store)
    for case, test, outcome, ops in CASES:
        node = evidence.Case(f"test_toy.py::TestToyCPU::{case}", T + test, outcome, 0.1, {o: 1 for o in ops}, ops)
        evidence.record(store, node)
    store.commit()
    store.close()
    (tmp_path / "backend.yaml").write_text(PROFILE, encoding="utf-8")
    (tmp_path / "caps.yaml").write_text(CAPS, encoding="utf-8")
    return {"store": tmp_path / "s.sqlite", "profile": tmp_path / "backend.yaml", "caps": tmp_path / "caps.yaml"}


def select(toy: dict[str, Path], out: Path, *extra: str) -> int:
    common = ["--profile", str(toy["profile"]), "--capabilities", str(toy["caps"]), "--store", str(toy["store"])]
    return main(["select", *common, "--out", str(out), *extra])


def llm(server: Scripted, *extra: str) -> list[str]:
    return ["--reasoner", "llm", "--llm-endpoint", server.url, "--llm-model", "toy-model", *extra]


def entries(out: Path) -> list[tuple[str, str, str | None, str]]:
    tests = yaml.safe_load((out / "test_toy.yaml").read_text())["test_suite_config"]["files"][0]["tests"]
    return [(t["names"][0], t["mode"], (t.get("only") or {}).get("dtypes", [None])[0], t["reason"]) for t in tests]


@pytest.fixture
def rules_out(toy: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """The rule reasoner's configs for the toy store, to compare with."""
    assert select(toy, tmp_path / "rules") == 0
    capsys.readouterr()
    return tmp_path / "rules"


def test_valid_proposals_reach_the_config_key_only_in_the_header(
    toy: dict[str, Path], server: Scripted, tmp_path: Path
) -> None:
    server.script = [
        decisions(
            {"test": T + "test_add", "mode": "xfail", "reason": "aten::add.Tensor rounds differently on toy"},
            {"test": T + "test_lacks", "mode": "xfail", "reason": "aten::cumsum is a composite", "dtype": "float32"},
            {"test": T + "test_cuda_only", "mode": "skip", "reason": "@onlyCUDA: never instantiated for toy"},
            {"test": T + "test_grad", "mode": "skip", "reason": "needs autograd", "dtype": None},
        )
    ]
    out = tmp_path / "out"
    common = ["--profile", str(toy["profile"]), "--capabilities", str(toy["caps"]), "--store", str(toy["store"])]
    argv = [str(Path(sys.executable).with_name("testselect")), "select", *common, "--out", str(out), *llm(server)]
    run = subprocess.run(argv, env=os.environ | {"OPENAI_API_KEY": KEY}, capture_output=True, text=True, check=False)
    assert (run.returncode, run.stderr) == (
        0,
        "llm: test_toy.py: 5 tests, 1 request: 4 accepted, 0 rejected, 1 without a proposal; run so far: 1 requests, "
        "0 cached, 4 accepted, 0 rejected, 1 without a proposal\n",
    )
    assert entries(out) == [
        ("TestToy::test_add", "xfail", None, "aten::add.Tensor rounds differently on toy"),
        ("TestToy::test_add", "skip", "float64", "dtype float64 is not in toy's supported_dtypes"),
        ("TestToy::test_crash", "mandatory_success", None, "no unsupported dtype, op, feature or restriction found"),
        ("TestToy::test_crash", "skip", "float32", "1 of 1 float32 cases crashed on the CPU reference run"),
        ("TestToy::test_cuda_only", "skip", None, "@onlyCUDA: never instantiated for toy"),
        ("TestToy::test_grad", "skip", None, "needs autograd"),
        ("TestToy::test_lacks", "mandatory_success", None, "no unsupported dtype, op, feature or restriction found"),
        ("TestToy::test_lacks", "xfail", "float32", "aten::cumsum is a composite"),
    ]
    text = (out / "test_toy.yaml").read_text()
    assert "        # llm (validated): aten::add.Tensor: aten::add.Tensor rounds differently on toy" in text
    assert "        # llm (validated): onlyCUDA: @onlyCUDA: never instantiated for toy" in text
    (request,) = server.requests
    assert request["headers"]["Authorization"] == f"Bearer {KEY}"
    body = request["body"]
    assert (body["model"], body["temperature"], body["response_format"]) == ("toy-model", 0, {"type": "json_object"})
    facts = json.loads(body["messages"][1]["content"])
    assert [t["test"] for t in facts["tests"]] == [
        T + n for n in ("test_add", "test_crash", "test_cuda_only", "test_grad", "test_lacks")
    ]
    assert facts["device"]["ops"] == {
        "aten::add.Tensor": ["float32"],
        "aten::cumsum": "not registered",
        "aten::ones": ["float32"],
    }
    cached = "".join(p.read_text() for p in Path(f"{toy['store']}.llm-cache").iterdir())
    for where in (request["raw"].decode(), run.stdout, run.stderr, text, cached, " ".join(argv)):
        assert KEY not in where


def test_invalid_proposals_are_rejected_counted_and_the_rules_kept(
    toy: dict[str, Path], server: Scripted, tmp_path: Path, rules_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.script = [
        decisions(
            {"test": T + "test_lacks", "mode": "mandatory_success", "reason": "fine", "dtype": "float32"},
            {"test": T + "test_add", "mode": "maybe", "reason": "aten::add.Tensor"},
            {"test": T + "test_add", "mode": "skip", "reason": "complex64 is unsupported", "dtype": "complex64"},
            {"test": T + "test_grad", "mode": "skip"},
            {"test": T + "test_crash", "mode": "xfail", "reason": "float32 crashed on CPU", "dtype": "float32"},
            {"test": T + "test_cuda_only", "mode": "skip", "reason": "flaky on every device"},
            {"test": T + "test_add", "mode": "skip", "reason": "aten::mm is missing for float32"},
            {"test": T + "test_nope", "mode": "skip", "reason": "float32"},
            ["not", "an", "object"],
        )
    ]
    assert select(toy, tmp_path / "out", *llm(server)) == 0
    assert (tmp_path / "out" / "test_toy.yaml").read_text() == (rules_out / "test_toy.yaml").read_text()
    assert capsys.readouterr().err.splitlines() == [
        f"llm: rejected: {T}test_lacks [float32]: mandatory_success where the rules found: toy lacks aten::cumsum, "
        "run on CPU by 1 of 1 float32 cases; the rule decision stays",
        f"llm: rejected: {T}test_add: mode 'maybe' is not one of: mandatory_success, xfail, xfail_strict, skip; "
        "the rule decision stays",
        f"llm: rejected: {T}test_add [complex64]: dtype 'complex64' is not one of the test's: float32, float64; "
        "the rule decision stays",
        f"llm: rejected: {T}test_grad: field 'reason' missing or not a string; the rule decision stays",
        f"llm: rejected: {T}test_crash [float32]: xfail where only skip can stand (op evidence: CPU outcome: 1 of 1 "
        "float32 cases crashed on the CPU reference run); the rule decision stays",
        f"llm: rejected: {T}test_cuda_only: a skip reason names no op, dtype, feature or decorator of the test; "
        "the rule decision stays",
        f"llm: rejected: {T}test_add: a second decision for the same test and dtype; the rule decision stays",
        "llm: rejected: the reply: 'test_toy.py::TestToy::test_nope' is not a test of this request; "
        "the rule decision stays",
        "llm: rejected: the reply: a decision is not a JSON object; the rule decision stays",
        "llm: test_toy.py: 5 tests, 1 request: 0 accepted, 9 rejected, 0 without a proposal; run so far: 1 requests, "
        "0 cached, 0 accepted, 9 rejected, 0 without a proposal",
    ]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ('{"decisions": [', "not JSON (Expecting value: line 1 column 16 (char 15))"),
        ('{"verdicts": []}', 'not an object with a "decisions" list'),
        ("[]", 'not an object with a "decisions" list'),
    ],
)
def test_malformed_replies_keep_the_rules(
    toy: dict[str, Path],
    server: Scripted,
    tmp_path: Path,
    rules_out: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    why: str,
) -> None:
    server.script = [chat(content)]
    assert select(toy, tmp_path / "out", *llm(server)) == 0
    assert (tmp_path / "out" / "test_toy.yaml").read_text() == (rules_out / "test_toy.yaml").read_text()
    assert capsys.readouterr().err.splitlines() == [
        f"llm: rejected: the reply: {why}; the rule decision stays",
        "llm: test_toy.py: 5 tests, 1 request: 0 accepted, 1 rejected, 5 without a proposal; run so far: 1 requests, "
        "0 cached, 0 accepted, 1 rejected, 5 without a proposal",
    ]


def test_an_unknown_op_in_a_reason_is_refused() -> None:
    """Unit check of the op rule on its own: a cited op must be one a recorded case ran."""
    test = Facts(
        "f.py::T::t",
        (),
        ("float32",),
        (),
        (),
        (CaseFacts("f.py::TC::t_cpu_float32", "float32", "passed", {"aten::mm": frozenset()}),),
    )
    rules = {test.node_id: RuleReasoner(Profile("d", {"eager_ops": True})).bucket(test)}
    reply = json.dumps({"decisions": [{"test": test.node_id, "mode": "skip", "reason": "aten::mm and aten::bmm hang"}]})
    (rejection,) = validate(reply, [test], rules).rejected
    assert rejection.why == "the reason names aten::bmm, which no recorded case of the test ran"


def test_429_and_503_are_retried_after_the_servers_retry_after(
    toy: dict[str, Path], server: Scripted, tmp_path: Path
) -> None:
    ok = decisions({"test": T + "test_grad", "mode": "skip", "reason": "autograd is not hooked"})
    past = "Wed, 21 Oct 2015 07:28:00 GMT"  # an HTTP date already past: retry at once, not after the 1 s backoff
    server.script = [(429, {"Retry-After": "2"}, b'{"error": "slow down"}'), (503, {"Retry-After": past}, b"{}"), ok]
    assert select(toy, tmp_path / "out", *llm(server)) == 0
    first, second, third = (request["at"] for request in server.requests)
    assert second - first >= 2.0  # the default backoff would be 1 s
    assert third - second < 0.9
    assert ("TestToy::test_grad", "skip", None, "autograd is not hooked") in entries(tmp_path / "out")


def test_5xx_exhausting_retries_is_one_error_line_or_the_rules(
    toy: dict[str, Path], server: Scripted, tmp_path: Path, rules_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.script = [(500, {"Retry-After": "0"}, b'{"error": "boom"}')]
    assert select(toy, tmp_path / "out", *llm(server, "--llm-retries", "2")) == 2
    url = f"{server.url}/chat/completions"
    assert capsys.readouterr().err == f"error: llm endpoint {url}: HTTP 500 after 3 attempts\n"
    assert len(server.requests) == 3
    assert not (tmp_path / "out").exists()
    assert select(toy, tmp_path / "out", *llm(server, "--llm-retries", "1", "--llm-fallback", "rules")) == 0
    assert capsys.readouterr().err == (
        f"warning: llm endpoint {url}: HTTP 500 after 2 attempts; the rules decide the remaining tests "
        "(--llm-fallback rules)\n"
    )
    assert len(server.requests) == 5
    assert (tmp_path / "out" / "test_toy.yaml").read_text() == (rules_out / "test_toy.yaml").read_text()


def test_not_a_chat_completion_or_a_refused_key_is_an_error(
    toy: dict[str, Path], server: Scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"{server.url}/chat/completions"
    server.script = [(200, {}, b'{"choices": []}')]
    assert select(toy, tmp_path / "out", *llm(server)) == 2
    assert capsys.readouterr().err == (
        f"error: llm endpoint {url}: HTTP 200 but not a chat completion (no choices[0].message.content)\n"
    )
    server.script = [(401, {}, b'{"error": "bad key"}')]
    assert select(toy, tmp_path / "out", *llm(server, "--llm-key-env", "TOY_KEY")) == 2
    assert capsys.readouterr().err == f"error: llm endpoint {url}: HTTP 401 (check the key's environment variable)\n"
    assert "Authorization" not in server.requests[-1]["headers"]  # TOY_KEY is unset: a keyless request


def test_a_slow_endpoint_times_out_into_one_error_line(
    toy: dict[str, Path], server: Scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.script = [(200, {"X-Delay": "1"}, b"{}")]
    assert select(toy, tmp_path / "out", *llm(server, "--llm-timeout", "0.3", "--llm-retries", "1")) == 2
    assert capsys.readouterr().err == f"error: llm endpoint {server.url}/chat/completions: timed out after 2 attempts\n"
    assert len(server.requests) == 2


def test_the_cache_makes_a_rerun_send_nothing(
    toy: dict[str, Path], server: Scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.script = [decisions({"test": T + "test_grad", "mode": "skip", "reason": "autograd is not hooked"})]
    cache = tmp_path / "cache"
    assert select(toy, tmp_path / "one", *llm(server, "--llm-batch", "2", "--llm-cache", str(cache))) == 0
    assert len(server.requests) == 3  # 5 tests, 2 a request
    assert "1 request" in capsys.readouterr().err
    entry = sorted(cache.iterdir())[0]
    entry.write_text("{damaged", encoding="utf-8")
    assert select(toy, tmp_path / "one", *llm(server, "--llm-batch", "2", "--llm-cache", str(cache))) == 0
    assert len(server.requests) == 4  # the damaged entry is asked again, and rewritten
    assert json.loads(entry.read_text())["content"]
    capsys.readouterr()
    server.shutdown()  # offline from here
    assert select(toy, tmp_path / "two", *llm(server, "--llm-batch", "2", "--llm-cache", str(cache))) == 0
    assert len(server.requests) == 4
    assert capsys.readouterr().err.splitlines()[-1] == (
        "llm: test_toy.py: 1 tests, cached reply: 0 accepted, 1 rejected, 1 without a proposal; run so far: "
        "0 requests, 3 cached, 1 accepted, 2 rejected, 4 without a proposal"  # test_grad is in the second batch
    )
    assert (tmp_path / "two" / "test_toy.yaml").read_text() == (tmp_path / "one" / "test_toy.yaml").read_text()
    assert len(list(cache.iterdir())) == 3


def test_plan_scope_takes_the_options_and_asks_nothing(
    toy: dict[str, Path], server: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["plan-scope", "--profile", str(toy["profile"]), "--store", str(toy["store"])]
    assert main(args) == 0
    rules = capsys.readouterr().out
    assert main([*args, *llm(server)]) == 0
    assert capsys.readouterr().out == rules
    assert server.requests == []


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        (["--reasoner", "llm"], "--reasoner llm needs --llm-endpoint"),
        (["--reasoner", "llm", "--llm-endpoint", "http://h/v1"], "--reasoner llm needs --llm-model"),
        (
            ["--reasoner", "llm", "--llm-endpoint", "ftp://h", "--llm-model", "m"],
            "--llm-endpoint ftp://h: not an http(s) URL with a host",
        ),
        (["--llm-model", "m"], "--llm-model needs --reasoner llm"),
        (["--llm-fallback", "rules"], "--llm-fallback needs --reasoner llm"),
        (
            ["--reasoner", "llm", "--llm-endpoint", "http://h", "--llm-model", "m", "--llm-batch", "0"],
            "--llm-batch 0: must be at least 1",
        ),
        (
            ["--reasoner", "llm", "--llm-endpoint", "http://h", "--llm-model", "m", "--llm-key-env", "A-B"],
            "--llm-key-env A-B: not an environment variable name",
        ),
        (
            ["--reasoner", "llm", "--llm-endpoint", "http://h", "--llm-model", "m", "--llm-timeout", "0"],
            "--llm-timeout 0: must be more than 0",
        ),
        (
            ["--reasoner", "llm", "--llm-endpoint", "http://h", "--llm-model", "m", "--llm-retries", "-1"],
            "--llm-retries -1: must be 0 or more",
        ),
    ],
)
def test_bad_options_are_one_error_line(
    toy: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], error: str
) -> None:
    assert select(toy, tmp_path / "out", *extra) == 2
    assert capsys.readouterr().err == f"error: {error}\n"


def test_an_endpoint_that_does_not_answer_is_one_error_line(
    toy: dict[str, Path], server: Scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = server.url
    server.shutdown()
    server.server_close()  # the port now refuses connections
    args = ["--reasoner", "llm", "--llm-endpoint", url, "--llm-model", "m", "--llm-retries", "0"]
    assert select(toy, tmp_path / "out", *args) == 2
    assert capsys.readouterr().err == f"error: llm endpoint {url}/chat/completions: [Errno 111] Connection refused\n"


FUZZ_TEST = Facts(
    "f.py::T::t",
    ("autograd",),
    ("float32", "float64"),
    (),
    (),
    (
        CaseFacts("f.py::TC::t_cpu_float32", "float32", "passed", {"aten::cumsum": frozenset({"float32"})}),
        CaseFacts("f.py::TC::t_cpu_float64", "float64", "crashed", {}),
    ),
)
WORDS = st.sampled_from(["aten::cumsum", "aten::mm", "float32", "float64", "complex64", "autograd", "onlyCUDA", "x"])
PROPOSAL = st.fixed_dictionaries(
    {},
    optional={
        "test": st.sampled_from([FUZZ_TEST.node_id, "f.py::T::u", 3, None]),
        "mode": st.sampled_from([*MODES, "maybe", 1]),
        "reason": st.one_of(st.lists(WORDS, max_size=4).map(" ".join), st.integers(), st.just("a\nb")),
        "dtype": st.sampled_from([None, "float32", "float64", "int8", 7]),
    },
)


@pytest.mark.parametrize(
    ("restrictions", "autograd"),
    [(("onlyCUDA",), True), ((), False), ((), True)],
    ids=["device-restriction", "unhooked-feature", "dtype-blockers"],
)
@settings(max_examples=100, deadline=None)
@given(
    reply=st.one_of(
        st.lists(st.one_of(PROPOSAL, st.integers(), st.text(max_size=5)), max_size=6).map(
            lambda items: json.dumps({"decisions": items})
        ),
        st.text(max_size=30),
    )
)
def test_fuzzed_replies_never_pass_a_blocker(restrictions: tuple[str, ...], autograd: bool, reply: str) -> None:
    """Whatever the reply, validation returns, and what it lets through agrees with the facts."""
    test = Facts(FUZZ_TEST.node_id, FUZZ_TEST.features, FUZZ_TEST.dtypes, restrictions, (), FUZZ_TEST.cases)
    caps = Capabilities("d", frozenset({"float32", "float64"}), {"aten::ones": frozenset()})
    rules = RuleReasoner(Profile("d", {"eager_ops": True, "autograd": autograd}), caps).bucket(test)
    verdict = validate(reply, [test], {test.node_id: rules})
    (decided,) = verdict.decisions.values()
    by_dtype = {d.dtype: d for d in rules}
    for decision in decided:
        rule = by_dtype.get(decision.dtype, rules[0])
        assert decision.dtype is None or decision.dtype in dtypes_of(test)
        if decision.basis.startswith("llm"):
            assert decision.mode != "mandatory_success" or rule.mode == "mandatory_success"
            assert decision.mode == "mandatory_success" or named_facts(test, decision.reason)
            assert "aten::mm" not in decision.reason
    try:
        proposals = json.loads(reply)["decisions"]
    except (ValueError, TypeError, KeyError, IndexError):
        proposals = None
    if isinstance(proposals, list):
        assert verdict.accepted + len(verdict.rejected) == len(proposals)  # each proposal counted once
    else:
        assert (verdict.accepted, len(verdict.rejected), verdict.unanswered) == (0, 1, [test.node_id])
