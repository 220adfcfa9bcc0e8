"""Python side of `launch/mariadb.sh`: start/stop the project's private MariaDB for tests and
benchmarks. `home`/`port` select another instance (its own folder and port, e.g. a throwaway server
a test may stop); the defaults are the project's server (port 3307, its folder one per user and
port on the machine, shared by every checkout: `launch/mariadb.sh dir`)."""
from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import pathlib
import subprocess
import uuid

from hr1_jax.utils.logging import log_event

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


def is_running(port: int = 0) -> bool:
    try:
        return _run("status", 30, "", port).returncode == 0
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


# Runs that share the server (two demos, a demo and a test suite, in one checkout or two) record
# themselves as its users in its folder, so the run that started it does not stop it under the
# others: the last user to leave stops a server a run started ("started_by_run"), never one the
# user started by hand. Joining and starting, and leaving and stopping, happen under one lock, so
# a run never joins a server that the last user is stopping.
@functools.lru_cache(maxsize=None)
def _default_folder(port: int) -> pathlib.Path:
    proc = _run("dir", 30, "", port)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"launch/mariadb.sh dir failed: {(proc.stdout + proc.stderr).strip()[:300]}")
    return pathlib.Path(proc.stdout.strip())


def folder_of(port: int = 0) -> pathlib.Path:
    """The folder of the project's server on `port` (0: the default port): $HR1_MARIADB_DIR, or
    the script's default (`launch/mariadb.sh dir`)."""
    env_folder = os.environ.get("HR1_MARIADB_DIR")
    return pathlib.Path(env_folder) if env_folder else _default_folder(int(port))


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


@contextlib.contextmanager
def project_server(port: int = 0, timeout_s: float = 90):
    """The project's server on `port` around a block, started if it is not running. Yields
    (ok, message, started); while ok, this process is one of its users, and the last user to
    leave stops it if a run started it."""
    users = folder_of(port) / "users"
    with _locked(users):
        started = not is_running(port)
        ok, message = start(timeout_s, port=port) if started else (True, "[mariadb] already running")
        if started:
            log_event("dbbench", "mariadb_start", ok=ok, message=message)
        if not ok:
            record = None
        else:
            if started:
                (users / "started_by_run").touch()
            record = users / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
            record.touch()
    try:
        yield ok, message, ok and started
    finally:
        if record is not None:
            with _locked(users):
                record.unlink(missing_ok=True)
                if _last_user_left(users):
                    log_event("dbbench", "mariadb_stop", message=stop(timeout_s, port=port)[1])


def _last_user_left(users: pathlib.Path) -> bool:
    """True when no live user remains of a server a run started (its marker is then removed)."""
    live = [f for f in users.iterdir() if f.name[0].isdigit()]
    for dead in [f for f in live if not _alive(int(f.name.split("-", 1)[0]))]:
        dead.unlink(missing_ok=True)
        live.remove(dead)
    marker = users / "started_by_run"
    if live or not marker.exists():
        return False
    marker.unlink()
    return True
