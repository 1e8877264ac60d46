"""One problem in one spec, status or queue file, located as precisely as we can: what makes a
file invalid, from the reader that finds it to the status message and the API."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SpecError:
    """One problem in one file, located as precisely as we can."""

    file: str
    field: str | None
    line: int | None
    column: int | None
    message: str

    @classmethod
    def unplaced(cls, message: str, file: str = "") -> SpecError:
        """A problem of the file as a whole: no field, line or column. Without `file`, it
        reads as its message alone."""
        return cls(file, None, None, None, message)

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        parts = [where, self.field, self.message]
        return ": ".join(p for p in parts if p)
