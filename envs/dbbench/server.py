"""Python side of `launch/mariadb.sh`: start/stop the project's private MariaDB for tests and
benchmarks. `home`/`port` select another instance (its own folder and port, e.g. a throwaway server
a test may stop); the defaults are the project's server (.cache/mariadb, port 3307)."""
from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
import subprocess
import uuid

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "launch" / "mariadb.sh"


def _run(command: str, timeout_s: float, home: str, port: int) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if home:
        env["HR1_MARIADB_DIR"] = str(home)
    if port:
        env["HR1_MARIADB_PORT"] = str(port)
    return subprocess.run(["bash", str(SCRIPT), command], capture_output=True, text=True, timeout=timeout_s,
                          env=env)


def is_running() -> bool:
    try:
        return _run("status", 30, "", 0).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def start(timeout_s: float = 90, home: str = "", port: int = 0) -> tuple[bool, str]:
    """Start the server if needed. Returns (ok, message); never raises for a server that can't start."""
    if not SCRIPT.exists():
        return False, f"{SCRIPT} missing"
    try:
        proc = _run("start", timeout_s, home, port)
    except subprocess.TimeoutExpired:
        return False, f"launch/mariadb.sh start timed out after {timeout_s}s"
    message = (proc.stdout + proc.stderr).strip()
    return proc.returncode == 0, message


def stop(timeout_s: float = 90, home: str = "", port: int = 0) -> tuple[bool, str]:
    try:
        proc = _run("stop", timeout_s, home, port)
    except subprocess.TimeoutExpired:
        return False, f"launch/mariadb.sh stop timed out after {timeout_s}s"
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


# Runs that share the server (e.g. two demos) record themselves as its users, so the run that
# started it does not stop it under the others: the last user to leave stops a server a run
# started ("started_by_run"), never one the user started by hand.
def _users_dir(home: str) -> pathlib.Path:
    return pathlib.Path(home or os.environ.get("HR1_MARIADB_DIR") or REPO / ".cache" / "mariadb") / "users"


@contextlib.contextmanager
def _locked(folder: pathlib.Path):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def join(started: bool, home: str = "") -> pathlib.Path:
    """Record this run as a user of the server (`started`: it started the server). Returns its record."""
    folder = _users_dir(home)
    with _locked(folder):
        if started:
            (folder / "started_by_run").touch()
        record = folder / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        record.touch()
    return record


def leave(record: pathlib.Path) -> bool:
    """Remove this run's record; True when it was the last live user of a server a run started
    (the caller stops it then)."""
    folder = record.parent
    with _locked(folder):
        record.unlink(missing_ok=True)
        users = [f for f in folder.iterdir() if f.name[0].isdigit()]
        for dead in [f for f in users if not _alive(int(f.name.split("-", 1)[0]))]:
            dead.unlink(missing_ok=True)
            users.remove(dead)
        marker = folder / "started_by_run"
        if users or not marker.exists():
            return False
        marker.unlink()
        return True
