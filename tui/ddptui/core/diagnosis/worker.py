"""One thread that runs the live diagnosis, off the readers' path.

Each node's reader thread writes its batch to disk and queues the rest here: the diagnosis of
the batch and then its delivery to the sink run on this worker, in the order the batches came,
so findings are raised in order, before the lines that raised them reach the screen, and may lag
the disk by a batch (never by seconds: the queue is bounded).
The thread starts when work arrives and ends after it has been idle a while; `join()` waits until
everything queued so far has run (the watch step does, before its verdict).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

MAX_QUEUED = 32  # batches: each is at most ~1000 lines or 50 ms of one node's output
IDLE_SECONDS = 2.0


class SerialWorker:
    def __init__(self, name: str = "ddptui-diagnosis", max_queued: int = MAX_QUEUED,
                 idle_seconds: float = IDLE_SECONDS) -> None:
        self._q: queue.Queue = queue.Queue(max_queued)
        self._name = name
        self._idle = idle_seconds
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None  # the first call that raised; re-raised by join()

    def put(self, fn: Callable[..., None], *args: object) -> None:
        self._ensure_thread()
        # Blocks only when MAX_QUEUED batches are already waiting: the last resort, holding the
        # reader back (the node's pipe then fills and the node waits) rather than letting the
        # diagnosis fall seconds behind or its queue grow without bound.
        self._q.put((fn, args))
        self._ensure_thread()  # the thread may have gone idle between the two

    def join(self) -> None:
        """Until every call queued so far has run (not from the worker itself: nothing to wait for)."""
        if threading.current_thread() is not self._thread:
            self._q.join()
        if self.error is not None:
            err, self.error = self.error, None
            raise err

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                fn, args = self._q.get(timeout=self._idle)
            except queue.Empty:
                with self._lock:
                    if self._q.empty():  # under the lock: a put() after this starts a new thread
                        self._thread = None
                        return
                continue
            try:
                fn(*args)
            except BaseException as e:  # kept for join(); the worker goes on with the next batch
                self.error = self.error or e
            finally:
                self._q.task_done()
