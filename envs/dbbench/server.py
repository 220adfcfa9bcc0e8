"""Python side of `launch/mariadb.sh`: start/stop the project's private MariaDB for tests and
benchmarks. `home`/`port` select another instance (its own folder and port, e.g. a throwaway server
a test may stop); the defaults are the project's server (.cache/mariadb, port 3307)."""
from __future__ import annotations

import os
import pathlib
import subprocess

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
