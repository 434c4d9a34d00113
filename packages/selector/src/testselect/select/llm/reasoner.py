"""`LlmReasoner`: the rule decisions, each replaced by the model's proposal where that is consistent with the facts.

Scope stays with the rules (globs and blockers, nothing to judge). Buckets are asked for a file's tests in batches,
when the first of a batch is bucketed, so `plan-scope` sends nothing and a file costs ceil(tests / batch) requests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

from testselect.select.capabilities import Capabilities
from testselect.select.llm.client import Endpoint, EndpointError, complete
from testselect.select.llm.prompt import messages
from testselect.select.llm.validate import Verdict, validate
from testselect.select.profile import Profile
from testselect.select.reasoner import Decision, DeviceCase, FileScope, RecordedCase, RuleReasoner, TestFacts


class LlmReasoner:
    """Asks an OpenAI-compatible endpoint; `totals` counts requests, cached replies and the proposals' fates."""

    def __init__(
        self,
        profile: Profile,
        capabilities: Capabilities | None,
        endpoint: Endpoint,
        cache: Path,
        batch: int = 8,
        fallback_to_rules: bool = False,
        report: Callable[[str], None] = print,
    ) -> None:
        self.profile = profile
        self.capabilities = capabilities
        self.rules = RuleReasoner(profile, capabilities)
        self.endpoint = endpoint
        self.cache = cache
        self.batch = batch
        self.fallback_to_rules = fallback_to_rules
        self.report = report
        self.totals: Counter[str] = Counter()
        self._batches: dict[str, list[TestFacts]] = {}  # node id -> the batch it is asked in
        self._decided: dict[str, list[Decision]] = {}
        self._down: str | None = None  # why the endpoint is no longer asked (only with fallback_to_rules)

    def scope(self, path: str, error: str | None, tests: list[TestFacts]) -> FileScope:
        """The rules' scope; a selected file's tests are split into the batches `bucket` will ask for."""
        scope = self.rules.scope(path, error, tests)
        if scope.selected:
            for start in range(0, len(tests), self.batch):
                chunk = tests[start : start + self.batch]
                self._batches.update((test.node_id, chunk) for test in chunk)
        return scope

    def bucket(self, test: TestFacts) -> list[Decision]:
        """The validated decisions for `test`, asking for its whole batch the first time one of it is needed."""
        if test.node_id not in self._decided:
            self._ask(self._batches.get(test.node_id, [test]))
        self._batches.pop(test.node_id, None)
        return self._decided.pop(test.node_id)

    def predict(self, case: RecordedCase) -> DeviceCase:
        """A case the recording device ran is a fact, not a proposal: the rules read it."""
        return self.rules.predict(case)

    def _ask(self, tests: list[TestFacts]) -> None:
        rules = {test.node_id: self.rules.bucket(test) for test in tests}
        where = tests[0].node_id.split("::")[0]
        if self._down is None:
            try:
                reply = complete(self.endpoint, messages(tests, self.profile, self.capabilities), self.cache)
            except EndpointError as exc:
                if not self.fallback_to_rules:
                    raise
                self._down = str(exc)
                self.report(f"warning: {exc}; the rules decide the remaining tests (--llm-fallback rules)")
        if self._down is not None:
            self._decided.update(rules)
            return
        verdict = validate(reply.content, tests, rules)
        self._decided.update(verdict.decisions)
        self._tally(where, len(tests), reply.cached, verdict)

    def _tally(self, where: str, tests: int, cached: bool, verdict: Verdict) -> None:
        """Each rejection, then the batch's counts and the run's so far: the last line of a run is its total."""
        for rejection in verdict.rejected:
            what = rejection.node_id or "the reply"
            what += f" [{rejection.dtype}]" if rejection.dtype else ""
            self.report(f"llm: rejected: {what}: {rejection.why}; the rule decision stays")
        counts = {
            "accepted": verdict.accepted,
            "rejected": len(verdict.rejected),
            "unanswered": len(verdict.unanswered),
        }
        self.totals.update({"cached" if cached else "requests": 1, **counts})
        t = self.totals
        self.report(
            f"llm: {where}: {tests} tests, {'cached reply' if cached else '1 request'}: {verdict.accepted} accepted, "
            f"{len(verdict.rejected)} rejected, {len(verdict.unanswered)} without a proposal; run so far: "
            f"{t['requests']} requests, {t['cached']} cached, {t['accepted']} accepted, {t['rejected']} rejected, "
            f"{t['unanswered']} without a proposal"
        )
