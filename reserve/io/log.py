"""The filter log: rows kept and dropped by every step of reading and filtering eBird data."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

__all__ = ["FilterLog"]


@dataclass
class FilterLog:
    """Rows kept and dropped by every step, in the order the steps first ran.

    Counts from several chunks of the same step add up, so a streamed file gives the same log as
    the whole file read at once.

    Examples
    --------
    >>> log = FilterLog()
    >>> log.record("sed", "complete", kept=8, dropped=2)
    >>> log.record("sed", "complete", kept=1, dropped=0)
    >>> log.to_frame()[["table", "step", "kept", "dropped"]].values.tolist()
    [['sed', 'complete', 9, 2]]
    """

    counts: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    details: dict[tuple[str, str], str] = field(default_factory=dict)

    def record(self, table: str, step: str, *, kept: int, dropped: int, detail: str = "") -> None:
        """Add ``kept`` and ``dropped`` rows to step ``step`` of table ``table``."""
        slot = self.counts.setdefault((table, step), [0, 0])
        slot[0] += int(kept)
        slot[1] += int(dropped)
        if detail:
            self.details[(table, step)] = detail

    def apply(
        self,
        table: str,
        step: str,
        func: Callable[..., pd.DataFrame],
        frame: pd.DataFrame,
        /,
        detail: str = "",
        **kwargs: Any,
    ) -> pd.DataFrame:
        """Run ``func(frame, **kwargs)`` and record how many rows it kept and dropped."""
        out = func(frame, **kwargs)
        self.record(table, step, kept=len(out), dropped=len(frame) - len(out), detail=detail)
        return out

    def merge(self, other: FilterLog) -> None:
        """Add every count of ``other`` to this log."""
        for (table, step), (kept, dropped) in other.counts.items():
            self.record(table, step, kept=kept, dropped=dropped)
        self.details.update(other.details)

    def kept(self, table: str, step: str) -> int:
        """Rows kept by one step (0 when the step never ran)."""
        return self.counts.get((table, step), [0, 0])[0]

    def to_frame(self) -> pd.DataFrame:
        """One row per step: ``table``, ``step``, ``kept``, ``dropped``, ``detail``."""
        rows = [
            (t, s, k, d, self.details.get((t, s), "")) for (t, s), (k, d) in self.counts.items()
        ]
        return pd.DataFrame(rows, columns=["table", "step", "kept", "dropped", "detail"])
