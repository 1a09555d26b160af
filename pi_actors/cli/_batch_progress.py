"""The batch progress display on stderr: tasks done, failed and running, the rate and the
ETA. On a terminal a live rich bar; otherwise one plain line per finished task (a log file
or CI reads those). The counts are the display's own: :meth:`started` and :meth:`finished`
are called by the runner."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["BatchProgress"]


class BatchProgress:
    """``total``: the tasks to run in this invocation; ``skipped``: those already done."""

    def __init__(self, total: int, skipped: int, *, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total, self.skipped = total, skipped
        self.done = self.failed = self.running = 0
        self.began = time.monotonic()
        self.live = self.stream.isatty() if live is None else live
        self._bar: Any = None
        self._bar_task: Any = None

    def __enter__(self) -> BatchProgress:
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(
                TextColumn("batch"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                TimeRemainingColumn(), console=Console(file=self.stream), transient=False,
            )  # fmt: skip
            self._bar.start()
            self._bar_task = self._bar.add_task("batch", total=self.total, status=self._status())
        else:
            print(f"batch: {self.total} tasks to run, {self.skipped} already done", file=self.stream, flush=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.update(self._bar_task, status=self._status())
            self._bar.stop()
        print(f"batch: {self.done} done, {self.failed} failed, in {time.monotonic() - self.began:.1f} s", file=self.stream, flush=True)

    def _status(self) -> str:
        return f"failed {self.failed} · running {self.running} · {self.rate():.2f}/s"

    def rate(self) -> float:
        """Tasks finished per second since the start."""
        elapsed = time.monotonic() - self.began
        return self.done / elapsed if elapsed > 0 else 0.0

    def eta(self) -> float | None:
        """Seconds until every task is finished at the current rate (None before the first)."""
        rate = self.rate()
        return (self.total - self.done) / rate if rate > 0 else None

    def started(self, task_id: str, attempt: int) -> None:
        self.running += 1
        if self._bar is not None:
            self._bar.update(self._bar_task, status=self._status())

    def finished(self, result: dict[str, Any], *, final: bool) -> None:
        """A session ended; ``final``: its result was written (not to be retried)."""
        self.running -= 1
        if final:
            self.done += 1
            self.failed += 0 if result["ok"] else 1
        if self._bar is not None:
            self._bar.update(self._bar_task, completed=self.done, status=self._status())
            return
        state = "ok" if result["ok"] else f"{result['error_kind']} failure: {result['error']}"
        if not final:
            state += " (retrying)"
        eta = self.eta()
        print(
            f"batch: {result['id']} {state} [attempt {result['attempt']}, {result['seconds']:.1f} s] "
            f"{self.done}/{self.total} done, {self.failed} failed, {self.running} running, "
            f"{self.rate():.2f}/s, ETA {'?' if eta is None else f'{eta:.0f} s'}",
            file=self.stream, flush=True,
        )  # fmt: skip
