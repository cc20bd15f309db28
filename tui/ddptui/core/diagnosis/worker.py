"""One thread that runs the live diagnosis, off the readers' path.

Each node's reader thread writes its batch to disk, hands it to the screen, and queues its
diagnosis here; the calls run on this worker in the order they came. The queue is bounded: a
reader that finds it full does not wait (live.py: the diagnosis reads those lines back from the
node's log when it has caught up), so the job and the screen never wait for the diagnosis.
`on_idle` runs on the worker whenever the queue has emptied (live.py queues the lines it owes).
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
        self.on_idle: Callable[[], None] | None = None
        self.error: BaseException | None = None  # the first call that raised; re-raised by join()

    def put(self, fn: Callable[..., None], *args: object) -> None:
        self._ensure_thread()
        # Blocks when MAX_QUEUED calls are already waiting: for lines that cannot be read back
        # from disk (their log could not be written), the last resort, holding the reader back
        # (the node's pipe then fills and the node waits) rather than letting the queue grow
        # without bound.
        self._q.put((fn, args))
        self._ensure_thread()  # the thread may have gone idle between the two

    def offer(self, fn: Callable[..., None], *args: object) -> bool:
        """Queue the call if there is room now; False (nothing queued) if not."""
        self._ensure_thread()
        try:
            self._q.put_nowait((fn, args))
        except queue.Full:
            return False
        self._ensure_thread()
        return True

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
                if self.on_idle is not None and self._q.empty():
                    self.on_idle()  # before task_done: join() does not return while it queues more
            except BaseException as e:  # kept for join(); the worker goes on with the next batch
                self.error = self.error or e
            finally:
                self._q.task_done()
