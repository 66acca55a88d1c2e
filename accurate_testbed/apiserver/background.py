"""The server's own controllers' loop: run each step whenever the store changed.

Namespace termination and garbage collection are asynchronous in a real cluster too; running
them on a thread that wakes on every write keeps them prompt without polling.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from accurate_testbed.apiserver.store import Change, Expired, Store

# A step gets the changes since its last run, or None when they are unknown (run a full pass).
Step = Callable[[Sequence[Change] | None], None]


class BackgroundLoop:
    """A daemon thread; ``stop`` asks it to end and ``join`` waits for that, apart so that a
    server with several loops stops them all at once. Errors in a step are kept for tests to
    inspect."""

    def __init__(self, store: Store, steps: Sequence[Step]) -> None:
        self.store = store
        self.steps = steps
        self.errors: list[BaseException] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="apiserver-controllers", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the loop to end once the step it is running returns."""
        self._stopping.set()
        self.store.wake()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        seen = self.store.resource_version
        while not self._stopping.is_set():
            if not self.store.wait_for_change(seen, timeout=1.0):
                continue
            target = self.store.resource_version
            changes: Sequence[Change] | None
            try:
                changes = [c for c in self.store.changes_after(seen) if c.rv <= target]
            except Expired:
                changes = None
            seen = target
            for step in self.steps:
                try:
                    step(changes)
                except Exception as error:  # a failing step must not stop the others
                    self.errors.append(error)
