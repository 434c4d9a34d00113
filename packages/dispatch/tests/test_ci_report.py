"""The report: summary.json's figures, what it says it cannot know, escaping hostile strings, and a real headless
Chromium rendering."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import markupsafe
import pytest
from browser import FLAGS, chromium_or_skip, headless
from browser import pixels as read_pixels
from crcr.ci.model import (
    BuildResult,
    Candidate,
    Classification,
    Combination,
    CombinationResult,
    RunRecord,
    ShardResult,
)
from crcr.ci.model import TestOutcome as Case
from crcr.ci.report import ROW_LIMIT, regressions_and_fixes, render_html, shard_balance, summarize, write_report

HOSTILE = "test/test_ops.py::TestCommonDEV::test_<script>alert(1)</script>_\"'&amp;_float32"
HOSTILE_MESSAGE = "AssertionError: </td></table><script>document.body.innerHTML=''</script> \"'& <img src=x onerror=1>"
FLAKY = "test/test_view_ops.py::TestViewOpsDEV::test_flaky_contiguous"
CRASHED = "test/test_ops.py::TestCommonDEV::test_abort_sum_float32"
HUNG = "test/test_torch.py::TestTorchDEV::test_hang_cumsum"
FIXED = "test/test_torch.py::TestTorchDEV::test_was_broken"
HEAD = Candidate("backend", "HEAD", "0.3.0.dev0", "b" * 40)
V020 = Candidate("backend", "v0.2.0", "0.2.0", "a" * 40)
CORE_NEW = Candidate("core", "2.14.1", "2.14.1", "e" * 64)
CORE_OLD = Candidate("core", "2.13.0", "2.13.0", "d" * 64)
SUITE = Candidate("suite", "embedded <b>tree</b>", "embedded", "f" * 64)
REUSED = "20260101T000000Z-<prev>"


def _tests(shards: int, per_shard: int) -> list[Case]:
    tests = []
    for shard in range(1, shards + 1):
        for i in range(per_shard):
            nodeid = f"test/test_ops.py::TestCommonDEV::test_op_{shard}_{i}_float32"
            tests.append(Case(nodeid, "passed", "mandatory_success", 0.5 + i / 10, shard, ["passed"]))
        tests.append(Case(f"test/test_ops.py::TestCommonDEV::test_skip_{shard}", "skipped", "skip", 0.0, shard))
        tests.append(Case(f"test/test_ops.py::TestCommonDEV::test_xfail_{shard}", "xfailed", "xfail", 0.2, shard))
    return tests


def realistic_run() -> RunRecord:
    """Four combinations: a red primary (crash, hang, a hostile failure, a flake, a not-run test, a fix), the
    core matrix's 2.13.0 leg (green, its results reused from an earlier run), an older backend ref that fails to
    build against 2.14.1, and an incompatible one."""
    primary = Combination("primary", "primary", HEAD, CORE_NEW, SUITE)
    tests = _tests(3, 12)
    tests += [
        Case(
            HOSTILE,
            "failed",
            "mandatory_success",
            1.2,
            1,
            ["failed", "failed", "failed"],
            {"type": "AssertionError", "message": HOSTILE_MESSAGE},
            Classification("upstream", "only the core (torch) moved <since> the last green run", HOSTILE_MESSAGE),
            follows="core",
        ),
        Case(
            CRASHED,
            "crashed",
            "mandatory_success",
            0.0,
            2,
            ["crashed", "crashed"],
            {"message": "worker crashed", "signal": 6},
            Classification("backend", "the test process crashed with signal 6 (device-fatal)", "Fatal Python error"),
        ),
        Case(
            HUNG,
            "timeout",
            "mandatory_success",
            60.0,
            3,
            ["timeout"],
            {"message": "Timeout (>60.0s)"},
            Classification("backend", "the test hung until its timeout (device-fatal)", "Timeout (>60.0s)"),
        ),
        Case(
            FLAKY,
            "passed",
            "mandatory_success",
            0.4,
            2,
            ["failed", "passed"],
            {"message": "RuntimeError: transient device error, the kernel did not run"},
            Classification("flake", "failed, then passed on a retry (failed -> passed)", "transient device error"),
        ),
        Case("test/test_torch.py::TestTorchDEV::test_lost", "not_run", "mandatory_success", 0.0, 3),
        Case(FIXED, "passed", "mandatory_success", 0.3, 1, ["passed"]),
    ]
    primary_result = CombinationResult(
        primary,
        "failed",
        BuildResult(True, {"tributary-simulator": "dist/x.whl"}, {"tributary-simulator": "0" * 64}, cached=True),
        shards=[
            ShardResult(1, 30.0, 31.5, 1, tests=15),
            ShardResult(2, 30.0, 29.0, 1, reran=True, tests=16),
            ShardResult(3, 30.0, 36.2, 1, tests=16),
        ],
        tests=tests,
        seconds=96.7,
        wall_seconds=58.3,
    )
    core_old = CombinationResult(
        Combination("core-2.13.0", "core", HEAD, CORE_OLD, SUITE),
        "passed",
        BuildResult(True),
        shards=[ShardResult(1, 40.0, 41.0, 0, tests=20), ShardResult(2, 40.0, 39.0, 0, tests=19)],
        tests=[*_tests(2, 17), Case(HOSTILE, "passed", "mandatory_success", 1.0, 1, ["passed"])],
        seconds=80.0,
        wall_seconds=0.4,
        cached=REUSED,
    )
    broken = CombinationResult(
        Combination("backend-v0.2.0", "backend", V020, CORE_NEW, SUITE),
        "build_failed",
        BuildResult(
            False,
            first_error="torch/include/c10/util/C++17.h:13:2: error: #error C++20 or later compatible compiler "
            "is required to use PyTorch <&>",
            log="runs/r1/builds/v0.2.0-2.14.1.log",
        ),
        reason="the simulator's native extension does not build against torch 2.14.1",
        attributed_to="core",
    )
    incompatible = CombinationResult(
        Combination("backend-v0.1.0", "backend", Candidate("backend", "v0.1.0", "0.1.0", "9" * 40), CORE_NEW, SUITE),
        "incompatible",
        reason="v0.1.0 declares torch>=2.12,<2.14; the core is 2.14.1",
    )
    return RunRecord(
        run_id="20260102T030405Z-<run>",
        started="2026-01-02T03:04:05Z",
        trigger={"event": "push", "ref": "refs/heads/main"},
        environment={"python": "3.11.9", "os": "Linux", "arch": "x86_64"},
        device="dev'\"<x>",
        combinations=[primary_result, core_old, broken, incompatible],
        finished="2026-01-02T03:09:00Z",
        verdict="red: primary: 3 failing (backend), backend-v0.2.0: build failed",
    )


PREVIOUS_GREEN = {
    "primary": {HOSTILE: "passed", CRASHED: "passed", FIXED: "failed", FLAKY: "passed"},
    "core-2.13.0": {HOSTILE: "passed"},
}


def test_summary_figures() -> None:
    summary = summarize(realistic_run(), PREVIOUS_GREEN)
    primary, core_old, broken, incompatible = summary["combinations"]
    assert primary["counts"] == {
        "crashed": 1,
        "failed": 1,
        "not_run": 1,
        "passed": 38,
        "skipped": 3,
        "timeout": 1,
        "xfailed": 3,
    }
    assert primary["regressions"] == sorted([HOSTILE, CRASHED])  # HUNG was not in the previous green run
    assert primary["fixes"] == [FIXED]
    assert primary["attribution"] == {HOSTILE: "core"}
    assert [f["nodeid"] for f in primary["flaky"]] == [FLAKY]
    assert primary["failure_classes"] == {"backend": 2, "upstream": 1, "flake": 1, "unclassified": 1}
    assert primary["not_run"] == {
        "test/test_torch.py::TestTorchDEV::test_lost": "no shard reported it (its shard died twice)"
    }
    assert primary["shard_balance"] == round(36.2 / ((31.5 + 29.0 + 36.2) / 3), 3)
    assert primary["planned_balance"] == 1.0
    assert [s["counts"].get("passed", 0) for s in primary["shards"]] == [13, 13, 12]
    assert core_old["status"] == "passed"
    assert core_old["regressions"] == []
    assert broken["build"]["first_error"].startswith("torch/include/c10/util/C++17.h:13:2: error: #error C++20")
    assert broken["attributed_to"] == "core"
    assert incompatible["shards"] == []
    assert incompatible["shard_balance"] is None
    assert summary["totals"]["combinations"] == {"build_failed": 1, "failed": 1, "incompatible": 1, "passed": 1}
    assert summary["totals"]["regressions"] == 2
    assert summary["triage"] == "backend"
    assert summary["shard_balance"]["worst"] == primary["shard_balance"]
    assert [b["combination"] for b in summary["build_failures"]] == ["backend-v0.2.0"]
    assert [c["compared_with_green"] for c in summary["combinations"]] == [True, True, False, False]
    assert shard_balance([]) is None
    assert shard_balance([0.0, 0.0]) is None
    assert shard_balance([10.0, 10.0]) == 1.0


def test_write_report_round_trips_and_escapes(tmp_path: Path) -> None:
    summary_path, html_path = write_report(realistic_run(), tmp_path / "run", PREVIOUS_GREEN)
    assert (summary_path.name, html_path.name) == ("summary.json", "report.html")
    data = json.loads(summary_path.read_text())
    assert HOSTILE in data["combinations"][0]["regressions"]  # JSON keeps the raw string
    page = html_path.read_text()
    assert "<script" not in page.lower()
    assert "onerror=1>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;_&#34;&#39;&amp;amp;_float32" in page
    assert "embedded &lt;b&gt;tree&lt;/b&gt;" in page
    for needed in (
        "Combinations &times; shards",
        "Regressions and fixes",
        "Attribution",
        "Flaky tests",
        "Failure classes",
        "Build failures",
        "Shard balance",
        "Not run",
        "#error C++20 or later compatible compiler is required to use PyTorch &lt;&amp;&gt;",
        "died, rerun once",
        "<svg",
    ):
        assert needed in page, needed
    assert (
        """<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">"""
        in page
    )
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page
    assert f"{data['combinations'][0]['shard_balance']:.3f}" in page


def test_wall_time_and_shard_time_are_told_apart() -> None:
    run = realistic_run()
    summary = summarize(run, PREVIOUS_GREEN)
    primary, core_old, broken, _ = summary["combinations"]
    assert (primary["wall_seconds"], primary["shard_seconds"], primary["seconds"]) == (58.3, 96.7, 96.7)
    assert (core_old["wall_seconds"], core_old["shard_seconds"]) == (0.4, 80.0)
    assert (broken["wall_seconds"], broken["shard_seconds"]) == (0.0, 0.0)
    # the run: 03:04:05 to 03:09:00; shard time only of what ran here (core-2.13.0's was spent in REUSED)
    assert (summary["totals"]["wall_seconds"], summary["totals"]["shard_seconds"]) == (295.0, 96.7)
    text = Dom(render_html(summary)).joined()
    assert "wall time4 m 55 s (from the run's start to its finish)" in text  # the overview's <th> and <td>
    assert "shard time1 m 37 s (every shard's wall time, summed; 1 cached combination(s)" in text
    assert "wall 58.3 sshards 1 m 37 s" in text  # primary's total cell: wall<br>shards
    assert "wall 0.4 sshards 1 m 20 s" in text


def test_an_unfinished_run_has_no_wall_time() -> None:
    run = realistic_run()
    run.finished = ""
    summary = summarize(run, PREVIOUS_GREEN)
    assert summary["totals"]["wall_seconds"] is None
    assert "wall time- (from the run's start to its finish)" in Dom(render_html(summary)).joined()


def test_a_cached_combination_says_which_run_it_reused() -> None:
    summary = summarize(realistic_run(), PREVIOUS_GREEN)
    assert [c["cached"] for c in summary["combinations"]] == [None, REUSED, None, None]
    assert summary["totals"]["cached"] == 1
    text = Dom(render_html(summary)).joined()
    assert text.count("cached (from run ") == 1
    assert f"core matrixpassedcached (from run {REUSED})" in text  # in core-2.13.0's own cell


def test_no_previous_green_run_is_said_once_and_nothing_is_claimed_for_it() -> None:
    run = realistic_run()
    run.combinations[0].tests = [t for t in run.combinations[0].tests if t.nodeid not in (HOSTILE, CRASHED, FIXED)]
    previous = {"primary": {FLAKY: "passed"}, "backend-v0.2.0": {}}
    summary = summarize(run, previous)
    assert [(c["had_previous_green"], c["compared_with_green"]) for c in summary["combinations"]] == [
        (True, True),
        (False, False),
        (True, False),  # it had one, but no test ran to compare
        (False, False),
    ]
    text = Dom(render_html(summary)).joined()
    assert "matches the previous green run" not in text
    assert text.count("No previous green run to compare with") == 1
    assert "No previous green run to compare with for core-2.13.0, backend-v0.1.0: their regressions" in text
    assert "No test ran in backend-v0.2.0, so nothing there was compared" in text
    assert (
        "None: no test of primary went from passing to failing since its previous green run, or passes now after "
        "failing." in text
    )


def test_a_fix_after_a_red_run_shows_without_any_green_run() -> None:
    """A test that failed the last time it ran and passes now is a fix, though no green run holds its failure."""
    run = realistic_run()
    primary = run.combinations[0]
    last = {FIXED: "failed", HOSTILE: "passed"}
    primary.regressions, primary.fixes = regressions_and_fixes(primary, None, last)
    assert (primary.regressions, primary.fixes) == ([], [FIXED])  # no green run: no regression is claimed
    summary = summarize(run, {})
    assert summary["combinations"][0]["fixes"] == [FIXED]
    text = Dom(render_html(summary)).joined()
    assert re.search(r"Regressions and fixes.*primary\s*fix\s*test/test_torch\.py::TestTorchDEV::test_was_broken", text)


def test_without_any_previous_green_run_no_combination_is_called_unchanged() -> None:
    summary = summarize(realistic_run(), {})
    assert not any(c["compared_with_green"] for c in summary["combinations"])
    text = Dom(render_html(summary)).joined()
    assert "None:" not in text.split("Regressions and fixes")[1].split("Attribution")[0]
    names = "primary, core-2.13.0, backend-v0.2.0, backend-v0.1.0"
    assert f"No previous green run to compare with for {names}: their regressions are unknown." in text
    assert "(in the 0 of 4 combinations compared with their previous green run)" in text


def test_tables_stop_at_the_row_limit() -> None:
    run = realistic_run()
    run.combinations[0].tests += [
        Case(f"test/test_lost.py::test_{i}", "not_run", "mandatory_success", 0.0, 3) for i in range(ROW_LIMIT)
    ]
    not_run = Dom(render_html(summarize(run, {}))).joined().split("Not run")[1]
    assert "and 1 more in summary.json" in not_run  # ROW_LIMIT + the fixture's own not-run test
    assert "test/test_lost.py::test_99" in not_run
    assert "test/test_torch.py::TestTorchDEV::test_lost" not in not_run  # sorted last, so the one cut


def test_an_empty_run_renders() -> None:
    run = RunRecord("r0", "2026-01-01T00:00:00Z", {}, {}, "dev", verdict="green")
    page = render_html(summarize(run, {}))
    assert "No shard ran" in page


def test_a_lone_surrogate_in_a_test_name_does_not_stop_the_report(tmp_path: Path) -> None:
    run = realistic_run()
    failing = next(t for t in run.combinations[0].tests if t.nodeid == HOSTILE)
    failing.nodeid = "test/test_\udcff.py::test_bytes"
    _, html_path = write_report(run, tmp_path, {})
    assert "test_bytes" in html_path.read_text(encoding="utf-8")


# --- hostile names ----------------------------------------------------------------------------------------------------

HOSTILE_NAMES = (
    "test/test_x.py::test_<script>alert(1)</script>",
    'test/test_x.py::test_"><img src=x onerror=alert(1)>',
    "test/test_x.py::test_{{ 7*7 }}",
    "test/test_x.py::test_{% raw %}{{ x }}{% endraw %}",
    "test/test_x.py::test_ünïcødé_测试_🙂_\u202etxt.exe",
    "test/test_x.py::test_" + "very_long_" * 600 + "<b>end</b>",
)
HOSTILE_COMBINATION = '"><img src=x onerror=alert(1)>{{ 7*7 }}'
HOSTILE_RUN = "<script>alert(1)</script>"


def hostile_run() -> RunRecord:
    """One combination whose every name is an attack: each test fails (a regression with a message, a reason and
    evidence), one follows the core, one was not run, and the results were reused from a run with a hostile id."""
    tests = [
        Case(
            name,
            "failed",
            "mandatory_success",
            0.1,
            1,
            ["failed", "failed"],
            {"message": name},
            Classification("backend", name, name),
            follows="core" if i == 0 else "",
        )
        for i, name in enumerate(HOSTILE_NAMES)
    ]
    tests.append(Case(HOSTILE_NAMES[1] + "_lost", "not_run", "mandatory_success", 0.0, 1))
    result = CombinationResult(
        Combination(HOSTILE_COMBINATION, "primary", HEAD, CORE_NEW, SUITE, variant="{% raw %}"),
        "failed",
        BuildResult(True),
        shards=[ShardResult(1, 1.0, 1.0, 1, tests=len(tests))],
        tests=tests,
        seconds=1.0,
        wall_seconds=1.5,
        cached=HOSTILE_RUN,
    )
    return RunRecord("r1", "2026-01-02T03:04:05Z", {}, {}, "dev", [result], verdict="red: {{ 7*7 }}")


HOSTILE_PREVIOUS = {HOSTILE_COMBINATION: dict.fromkeys(HOSTILE_NAMES, "passed")}


class Dom(HTMLParser):
    """A page's elements and text as an HTML parser builds them (entities decoded), for the page as written and
    for the DOM chromium dumps."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def joined(self) -> str:
        """The text without markup, newlines dropped (the templates break lines between elements)."""
        return "".join(self.text).replace("\n", "")

    def count(self, tag: str) -> int:
        return sum(1 for name, _ in self.elements if name == tag)


def assert_inert(dom: Dom) -> None:
    """No element or event handler came from a name, and every hostile string is there as text."""
    assert dom.count("script") == dom.count("img") == dom.count("iframe") == 0
    assert not [(tag, key) for tag, attrs in dom.elements for key in attrs if key.startswith("on")]
    text = dom.joined()
    for name in (*HOSTILE_NAMES, HOSTILE_COMBINATION, f"cached (from run {HOSTILE_RUN})", "red: {{ 7*7 }}"):
        assert name in text, name[:80]
    assert "test_49" not in text  # no template evaluated a name
    labels = [attrs.get("aria-label") for tag, attrs in dom.elements if tag == "svg"]
    assert labels == [f"shard balance of {HOSTILE_COMBINATION}"]


def test_hostile_names_render_escaped() -> None:
    page = render_html(summarize(hostile_run(), HOSTILE_PREVIOUS))
    assert "<script" not in page.lower()
    assert "<img" not in page.lower()
    assert "onerror=alert(1)>" not in page
    for name in HOSTILE_NAMES:
        assert str(markupsafe.escape(name)) in page, name[:80]
    assert "{{ 7*7 }}" in page
    assert "{% raw %}{{ x }}{% endraw %}" in page
    assert_inert(Dom(page))


# --- rendering in real headless Chromium ------------------------------------------------------------------------------


def test_chromium_renders_a_report_that_is_not_blank(tmp_path: Path) -> None:
    chromium = chromium_or_skip()
    _, html_path = write_report(realistic_run(), tmp_path / "run", PREVIOUS_GREEN)
    png = tmp_path / "report.png"
    shot = [f"--screenshot={png}", "--window-size=1280,2000", html_path.resolve().as_uri()]
    headless(chromium, tmp_path / "profile", *shot)
    if not png.exists():
        pytest.skip(f"chromium started but wrote no screenshot ({chromium} {' '.join(FLAGS[:1])})")
    width, height, pixels = read_pixels(png.read_bytes())
    assert (width, height) == (1280, 2000)
    colours = set(pixels)
    non_white = sum(1 for p in pixels if p != b"\xff\xff\xff")
    share = non_white / len(pixels)
    print(f"screenshot {width}x{height}: {len(colours)} distinct colours, {share:.1%} non-white pixels")
    # the status colours, the class pills and the SVG bars must be there, not just black text on white
    assert len(colours) > 50
    assert share > 0.05
    for rgb in ((0x05, 0x50, 0xAE), (0x9E, 0xCB, 0xFF), (0xDA, 0xFB, 0xE1), (0xFF, 0xD8, 0xD3)):
        assert bytes(rgb) in colours, f"colour #{bytes(rgb).hex()} (bars / status cells) is missing"


def test_chromium_builds_no_element_from_a_hostile_name(tmp_path: Path) -> None:
    chromium = chromium_or_skip()
    _, html_path = write_report(hostile_run(), tmp_path / "run", HOSTILE_PREVIOUS)
    done = headless(chromium, tmp_path / "profile", "--dump-dom", html_path.resolve().as_uri())
    assert "</html>" in done.stdout, done.stderr[-2000:]
    dom, written = Dom(done.stdout), Dom(html_path.read_text(encoding="utf-8"))
    assert_inert(dom)
    # no name closed a cell or a table early: the browser kept every row and cell as written
    assert (dom.count("tr"), dom.count("td")) == (written.count("tr"), written.count("td"))
    assert re.search(r"Regressions and fixes.*regression.*test_<script>alert\(1\)</script>", dom.joined())
