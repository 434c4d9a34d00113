"""Progress while the job runs: one line per combination with its phase and tests done / total (rich), or plain
lines where the output is not a terminal (CI logs)."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn


class RichProgress:
    """A live table of combinations; `close()` stops it."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(file=sys.stderr)
        self.live = self.console.is_terminal
        self.bars = Progress(
            TextColumn("{task.fields[combination]:<24}"), TextColumn("{task.description:<40}"), BarColumn(),
            MofNCompleteColumn(), TimeElapsedColumn(), console=self.console, disable=not self.live,
        )  # fmt: skip
        self.tasks: dict[str, TaskID] = {}
        self.bars.start()

    def _task(self, combination: str) -> TaskID:
        if combination not in self.tasks:
            self.tasks[combination] = self.bars.add_task("", total=None, combination=combination)
        return self.tasks[combination]

    def phase(self, combination: str, text: str) -> None:
        self.bars.update(self._task(combination), description=text)
        if not self.live:
            self.console.print(escape(f"[{combination}] {text}"), highlight=False)

    def note(self, text: str) -> None:
        """One line about the whole run (a variant skipped), printed above the live table or as a plain line."""
        self.console.print(escape(text), highlight=False, soft_wrap=True)

    def tests(self, combination: str, done: int, total: int) -> None:
        self.bars.update(self._task(combination), completed=done, total=total)
        if not self.live:
            self.console.print(escape(f"[{combination}] tests {done}/{total}"), highlight=False)

    def close(self) -> None:
        self.bars.stop()
