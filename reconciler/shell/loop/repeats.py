"""A repeating error in the log: one line when it starts, a summary with a count while it lasts,
one line when it clears.

A full disk fails every status write of every pass; Ray being down fails every call. One line
per failure would flood the log (often kept on that same disk) and hide what changed; the
start, a count now and then, and the end are what a reader needs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

SUMMARY_SECONDS = 60.0  # between two "still failing" lines of one condition


class Repeating:
    """One condition that may fail again and again (`failed`) until it works (`cleared`)."""

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        clock: Callable[[], float],
        *,
        level: int = logging.ERROR,
        summary_seconds: float = SUMMARY_SECONDS,
    ) -> None:
        self.log = logger
        self.what = what  # e.g. "cannot write statuses"
        self.clock = clock
        self.level = level
        self.summary_seconds = summary_seconds
        self.count = 0  # failures since it started; 0: not failing
        self._since = 0.0
        self._summarised_at = 0.0
        self._unsummarised = 0  # failures since the last line about it

    @property
    def active(self) -> bool:
        return self.count > 0

    def failed(self, detail: str) -> None:
        now = self.clock()
        self.count += 1
        if self.count == 1:
            self._since = self._summarised_at = now
            self._unsummarised = 0
            self.log.log(self.level, "%s: %s (repeats are counted, not logged)", self.what, detail)
            return
        self._unsummarised += 1
        if now - self._summarised_at >= self.summary_seconds:
            self.log.log(
                self.level,
                "%s: still failing, %d times in the last %.0f s (last: %s)",
                self.what,
                self._unsummarised,
                now - self._summarised_at,
                detail,
            )
            self._summarised_at, self._unsummarised = now, 0

    def cleared(self) -> None:
        if not self.count:
            return
        self.log.info(
            "%s: working again after %d failures in %.0f s",
            self.what,
            self.count,
            self.clock() - self._since,
        )
        self.count = 0
