"""The inline runner: each job in the calling process, in dependency order."""

from __future__ import annotations

import time
import traceback

from .base import Runner

__all__ = ["InlineRunner"]


class InlineRunner(Runner):
    """Runs each job in the calling process, in dependency order, holding its key's lock. A job's
    exception is recorded (``log_tail`` shows its traceback) and re-raised (``raise_errors=False``
    continues with the jobs that do not depend on it)."""

    name = "inline"

    def __init__(self, state_dir, is_done=None, raise_errors: bool = True):
        super().__init__(state_dir, is_done)
        self.raise_errors = raise_errors

    def _after_submit(self, job):
        record = self.record(job.key)
        with self.lock(job.key):
            try:
                if not self._done(job.key):
                    job.fn()
            except BaseException as error:
                with open(self.log_path(job.key), "a") as log:
                    log.write(f"--- inline attempt at {time.ctime()} failed\n{traceback.format_exc()}")
                self.write_record({**record, "exit": 1, "error": f"{type(error).__name__}: {error}"})
                if self.raise_errors or not isinstance(error, Exception):
                    raise
                return "failed"
            self.write_record({**record, "exit": 0})
        return "done" if self.is_done is None or self._done(job.key) else "failed"
