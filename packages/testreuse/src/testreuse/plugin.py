"""pytest entry point (hooks only): `--testreuse-config` turns it on; without it the plugin does nothing."""

from __future__ import annotations

import pytest

from testreuse.compiled import CompileModeError
from testreuse.errors import ConfigError
from testreuse.model import Mode
from testreuse.results import UnwritableResults
from testreuse.session import TestreuseSession, import_backend
from testreuse.torchbridge import BridgeError, check_backend

PLUGIN_NAME = "testreuse-session"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("testreuse", "reuse upstream PyTorch tests on a privateuse1 device")
    group.addoption(
        "--testreuse-config", action="append", default=[], metavar="PATH",
        help="config file or directory of them; repeatable, later ones take precedence",
    )  # fmt: skip
    group.addoption("--torch-root", metavar="DIR", help="upstream tree (default: $TORCH_ROOT, else the embedded one)")
    group.addoption(
        "--torch-device-root", metavar="DIR",
        help="the backend's own test tree, ${TORCH_DEVICE_ROOT} in configs (default: $TORCH_DEVICE_ROOT)",
    )  # fmt: skip
    group.addoption("--testreuse-device", metavar="NAME", help="expected privateuse1 backend name; checked")
    group.addoption(
        "--testreuse-backend", metavar="MODULE[:FUNC]",
        help="import MODULE (and call FUNC) first to register the privateuse1 backend, if it does not autoload",
    )  # fmt: skip
    group.addoption("--testreuse-results", metavar="PATH", help="append one JSON line per finished test")
    group.addoption("--testreuse-plan", metavar="PATH", help="write every collected case with its mode and rule")
    group.addoption(
        "--testreuse-isolation", choices=("worker", "fork", "none"), default="worker",
        help="worker (default): tests run in a forked worker, replaced when a crash or hang kills it; "
        "fork: a fresh fork per test; none: in this process",
    )  # fmt: skip
    group.addoption(
        "--testreuse-timeout", type=float, default=900.0, metavar="SECONDS",
        help="kill a test after this long (worker and fork isolation; default 900)",
    )  # fmt: skip


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for mode in Mode:
        config.addinivalue_line("markers", f"mode__{mode.value}: testreuse outcome bucket")
    if not config.option.testreuse_config:
        return
    if config.option.testreuse_timeout <= 0:
        raise pytest.UsageError("--testreuse-timeout must be positive")
    try:
        import_backend(config.option.testreuse_backend)
        check_backend(config.option.testreuse_device)
        state = TestreuseSession(config)
    except (ConfigError, BridgeError, UnwritableResults, CompileModeError) as exc:
        raise pytest.UsageError(str(exc)) from None
    except ImportError as exc:
        raise pytest.UsageError(
            f"--testreuse-backend: cannot import {config.option.testreuse_backend}: {exc}"
        ) from None
    for line in state.config_warnings():
        try:
            config.issue_config_time_warning(pytest.PytestConfigWarning(line), stacklevel=2)
        except pytest.PytestConfigWarning as exc:  # `-W error`: the run refuses what it would warn about
            raise pytest.UsageError(str(exc)) from None
    config.args = state.claim_args(config.args) if config.args_source is pytest.Config.ArgsSource.ARGS else []
    config.pluginmanager.register(StateHooks(state), PLUGIN_NAME)


class StateHooks:
    """Hooks that need the run's state; registered only when the plugin is enabled."""

    def __init__(self, state: TestreuseSession) -> None:
        self.state = state

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        try:
            self.state.prepare_torch()
        except (ConfigError, BridgeError) as exc:
            raise pytest.UsageError(str(exc)) from None

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector):
        report = yield
        if isinstance(collector, pytest.Session) and report.passed:
            report.result.extend(self.state.upstream_modules(collector))
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        try:
            deselected = self.state.classify(items)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
        if deselected:
            dropped = set(deselected)
            items[:] = [item for item in items if item not in dropped]
            config.hook.pytest_deselected(items=deselected)
        self.state.finish_collection(items, deselected)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool:
        self.state.run_protocol(item, nextitem)
        return True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        with self.state.running(item):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        self.state.note_failure(item, report, call.excinfo)
        self.state.note_graphs(item, report)
        self.state.mandatory_skip_to_failure(item, report)
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, exitstatus: int) -> None:
        self.state.stop_isolation(graceful=exitstatus != pytest.ExitCode.INTERRUPTED)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        self.state.summary(terminalreporter)

    def pytest_unconfigure(self) -> None:
        self.state.close()
