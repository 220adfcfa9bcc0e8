"""Python side of `launch/mariadb.sh`: start/stop the project's private MariaDB for tests and
benchmarks, and pick the DBBench backend (MariaDB when it is up, else the SQLite fallback)."""
from __future__ import annotations

import pathlib
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "launch" / "mariadb.sh"


def _run(command: str, timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), command], capture_output=True, text=True, timeout=timeout_s)


def is_running() -> bool:
    try:
        return _run("status", 30).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def start(timeout_s: float = 90) -> tuple[bool, str]:
    """Start the server if needed. Returns (ok, message); never raises for a server that can't start."""
    if not SCRIPT.exists():
        return False, f"{SCRIPT} missing"
    try:
        proc = _run("start", timeout_s)
    except subprocess.TimeoutExpired:
        return False, f"launch/mariadb.sh start timed out after {timeout_s}s"
    message = (proc.stdout + proc.stderr).strip()
    return proc.returncode == 0, message


def stop(timeout_s: float = 90) -> tuple[bool, str]:
    try:
        proc = _run("stop", timeout_s)
    except subprocess.TimeoutExpired:
        return False, f"launch/mariadb.sh stop timed out after {timeout_s}s"
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()
