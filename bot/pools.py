"""The threads `galley run` runs its work on, each pool named after what it runs. Work
handed to a pool never runs on a Slack listener's thread or holds a scheduler thread;
once the process is stopping, a pool takes no new work (the next start takes it up).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from enum import StrEnum
from typing import Any

log = logging.getLogger(__name__)


class Pool(StrEnum):
    """Every pool of the process, by what it runs."""

    DRAFTING = "drafting"  # model calls: a slot's fire, a person's draft, a redraft
    PUBLISHING = "publishing"  # publications: an approved run, a run people settled
    FIRES = "fires"  # the scheduler's: recipe fires, each only handed to DRAFTING
    HOUSEKEEPING = "housekeeping"  # the scheduler's: passes over the database alone
    SLACK = "slack"  # the scheduler's: passes that call Slack, a destination or the model


class WorkPool:
    """Threads that run handed-over work, remembered until done so a stop can wait for it."""

    def __init__(self, name: Pool, threads: int, stopping: threading.Event) -> None:
        self.name, self.stopping = name, stopping
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix=name)
        self._futures: set[Future[Any]] = set()
        self._lock = threading.Lock()

    def take(self, func: Callable[..., object], *args: Any) -> None:
        """Run `func(*args)` on this pool; nothing once the process is stopping."""
        if self.stopping.is_set():
            return
        try:
            future = self._executor.submit(self._logged, func, *args)
        except RuntimeError:  # the pool was shut down between the check and the submit
            return
        with self._lock:
            self._futures.add(future)
        future.add_done_callback(self._forget)

    def pending(self) -> set[Future[Any]]:
        with self._lock:
            return set(self._futures)

    def wait_idle(self, timeout: float | None = None) -> None:
        """Block until this pool has nothing left (tests and benchmarks)."""
        wait(self.pending(), timeout=timeout)

    def shut(self) -> set[Future[Any]]:
        """No new work, queued work cancelled: what is still running, to wait for."""
        running = self.pending()
        self._executor.shutdown(wait=False, cancel_futures=True)
        return running

    def _forget(self, future: Future[Any]) -> None:
        with self._lock:
            self._futures.discard(future)

    def _logged(self, func: Callable[..., object], *args: Any) -> object:
        try:
            return func(*args)
        except Exception:
            log.exception("%s job %s failed", self.name, getattr(func, "__name__", func))
            raise
