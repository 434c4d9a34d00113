"""Progress while the job runs: one live line per combination with its step, tests done / total, elapsed time and
the time left (rich); where the output is not a terminal (CI logs), plain lines, the test count at most every
`PLAIN_EVERY` seconds. How a combination ended (built, failed to build, incompatible, reused) is one line above the
table as soon as it is known."""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

#: Seconds between two plain test-count lines of one combination.
PLAIN_EVERY = 30.0


def clock(seconds: float | None) -> str:
    """`1:05` / `1:02:03`; `-:--` while unknown."""
    if seconds is None:
        return "-:--"
    whole = round(max(seconds, 0.0))
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class RichProgress:
    """A live table of combinations; `close()` stops it."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(file=sys.stderr)
        self.live = self.console.is_terminal
        self.bars = Progress(
            TextColumn("{task.fields[combination]:<22}"), TextColumn("{task.description:<44}"), BarColumn(),
            MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("left {task.fields[left]}"),
            console=self.console, disable=not self.live,
        )  # fmt: skip
        self.tasks: dict[str, TaskID] = {}
        self.printed: dict[str, tuple[float, tuple[int, int]]] = {}
        self.bars.start()

    def _task(self, combination: str) -> TaskID:
        if combination not in self.tasks:
            self.tasks[combination] = self.bars.add_task("", total=None, combination=combination, left=clock(None))
        return self.tasks[combination]

    def _plain(self, text: str) -> None:
        self.console.print(escape(text), highlight=False, soft_wrap=True)

    def phase(self, combination: str, text: str) -> None:
        self.bars.update(self._task(combination), description=text)
        if not self.live:
            self._plain(f"[{combination}] {text}")

    def note(self, text: str) -> None:
        """One line about the whole run (a variant skipped), printed above the live table or as a plain line."""
        self._plain(text)

    def done(self, combination: str, text: str) -> None:
        """How a combination ended: its row stops, and one line says it."""
        task = self._task(combination)
        self.bars.update(task, description=text[:44], left=clock(0))
        self.bars.stop_task(task)
        self._plain(f"[{combination}] {text}")

    def tests(self, combination: str, done: int, total: int, eta: float | None = None) -> None:
        self.bars.update(self._task(combination), completed=done, total=total, left=clock(eta))
        if self.live:
            return
        now = time.monotonic()
        when, count = self.printed.get(combination, (-PLAIN_EVERY, (-1, -1)))
        if (done, total) != count and (done == total or now - when >= PLAIN_EVERY):
            self.printed[combination] = (now, (done, total))
            self._plain(f"[{combination}] tests {done}/{total}, about {clock(eta)} left")

    def close(self) -> None:
        self.bars.stop()
