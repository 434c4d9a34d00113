"""The one error a refused program raises: a single line naming the core, the instruction and the JSON path."""

from __future__ import annotations


class ProgramError(ValueError):
    """A program the hardware would refuse (or a file that is not a program at all)."""

    def __init__(
        self,
        message: str,
        *,
        core: int | None = None,
        index: int | None = None,
        op: str | None = None,
        path: str | None = None,
    ) -> None:
        self.reason = " ".join(message.split())
        self.core = core
        self.index = index
        self.op = op
        self.path = path
        super().__init__(self._line())

    def _line(self) -> str:
        where = []
        if self.core is not None:
            where.append(f"core {self.core}")
        if self.index is not None:
            where.append(f"instruction {self.index}" + (f" ({self.op})" if self.op else ""))
        prefix = " ".join(where)
        suffix = f" (at {self.path})" if self.path else ""
        return f"{prefix}: {self.reason}{suffix}" if prefix else f"{self.reason}{suffix}"
