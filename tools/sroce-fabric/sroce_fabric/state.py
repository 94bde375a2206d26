"""The run directory of one fabric, /run/sroce-fabric/PREFIX/ (or
$SROCE_FABRIC_RUN_DIR/PREFIX): a lock, state.json, and logs of the helper
processes. state.json is a journal: every namespace and process is recorded
BEFORE it is created, so `down` can remove all of it even after `up` was
killed with SIGKILL half way."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time

DEFAULT_RUN_ROOT = "/run/sroce-fabric"


def run_root() -> str:
    return os.environ.get("SROCE_FABRIC_RUN_DIR", DEFAULT_RUN_ROOT)


class RunDir:
    def __init__(self, prefix: str):
        self.prefix = prefix
        self.path = os.path.join(run_root(), prefix)
        self.state_path = os.path.join(self.path, "state.json")
        self._lock_fd: int | None = None

    @property
    def lock_path(self) -> str:
        return os.path.join(run_root(), f".{self.prefix}.lock")

    def lock(self, timeout: float = 120.0) -> None:
        """One sroce-fabric command at a time per fabric. The lock file lives
        beside the run directory; `down` unlinks it, so a waiter that wins
        the lock checks it still holds the file at that path, else retries."""
        os.makedirs(run_root(), exist_ok=True)
        deadline = time.monotonic() + timeout
        while True:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        os.close(fd)
                        raise TimeoutError(f"fabric {self.prefix!r} is locked by another "
                                           f"sroce-fabric command for over {timeout:.0f} s")
                    time.sleep(0.05)
            try:
                if os.stat(self.lock_path).st_ino == os.fstat(fd).st_ino:
                    self._lock_fd = fd
                    return
            except FileNotFoundError:
                pass
            os.close(fd)

    def unlock(self, remove: bool = False) -> None:
        if self._lock_fd is not None:
            if remove:
                try:
                    os.unlink(self.lock_path)
                except FileNotFoundError:
                    pass
            os.close(self._lock_fd)
            self._lock_fd = None

    def exists(self) -> bool:
        return os.path.exists(self.state_path)

    def load(self) -> dict | None:
        try:
            with open(self.state_path) as f:
                return json.load(f)
        except FileNotFoundError:
            return None
        except json.JSONDecodeError:
            # A write cut short by SIGKILL: the .tmp rename below makes this
            # unlikely, but `down` must still work, from the name pattern.
            return None

    def save(self, state: dict) -> None:
        os.makedirs(self.path, exist_ok=True)
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.state_path)

    def file(self, name: str) -> str:
        os.makedirs(self.path, exist_ok=True)
        return os.path.join(self.path, name)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
