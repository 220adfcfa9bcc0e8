"""The project's MariaDB shared by every run on the machine (`envs.dbbench.server.project_server`):
its folder is one per user and port, not per checkout, so a second checkout joins the server the
first started instead of failing to bind its port; the last user to leave stops it. Real servers,
real processes, each test on a free port of its own."""
import os
import shutil
import socket
import subprocess
import sys
import textwrap

import pytest

from envs.dbbench import server

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _env_without_folder() -> dict:
    """The environment of a process that finds the server's folder itself."""
    return {k: v for k, v in os.environ.items() if k != "HR1_MARIADB_DIR"}


def _script_dir(checkout: str, port: int) -> str:
    env = {**_env_without_folder(), "HR1_MARIADB_PORT": str(port)}
    return subprocess.run(["bash", os.path.join(checkout, "launch", "mariadb.sh"), "dir"], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_two_checkouts_name_one_server_folder_per_port(tmp_path):
    for name in ("a", "b"):
        os.makedirs(tmp_path / name / "launch")
        shutil.copy(os.path.join(REPO, "launch", "mariadb.sh"), tmp_path / name / "launch")
    a, b = (_script_dir(str(tmp_path / name), 3307) for name in ("a", "b"))
    assert a == b == f"/tmp/hr1-mariadb-{os.getuid()}-3307"
    assert _script_dir(str(tmp_path / "a"), 3308) != a


def _other_process(port: int, body: str) -> subprocess.Popen:
    """Another run (a process of its own) inside `project_server(port)`: prints its (ok, started),
    then runs `body` (a line of Python) before it leaves."""
    code = textwrap.dedent(f"""
        import sys
        from envs.dbbench import server
        with server.project_server({port}) as (ok, message, started):
            print(ok, started, flush=True)
            {body}
    """)
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=_env_without_folder(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def test_the_server_outlives_the_run_that_started_it_while_another_uses_it(shared_server_port):
    port = shared_server_port
    other = _other_process(port, "sys.stdin.readline()")   # starts the server, holds it until told
    try:
        first = other.stdout.readline().split()
        if first[:1] == ["False"]:
            pytest.skip("no MariaDB server can start here")
        assert first == ["True", "True"]
        with server.project_server(port) as (ok, message, started):
            assert (ok, started) == (True, False), message
            other.communicate("leave\n", timeout=120)      # the starter ends first
            assert other.returncode == 0
            assert server.is_running(port)                 # ... and this run still has its server
        assert not server.is_running(port)                 # the last user stopped it
    finally:
        if other.poll() is None:
            other.kill()


def test_a_server_this_run_started_stays_up_for_a_run_that_joined_it(shared_server_port):
    port = shared_server_port
    with server.project_server(port) as (ok, message, started):
        if not ok:
            pytest.skip(f"no MariaDB server can start here: {message}")
        assert started
        other = _other_process(port, "pass")               # joins, leaves: not its server to stop
        out, _ = other.communicate(timeout=120)
        assert out.split() == ["True", "False"] and server.is_running(port)
    assert not server.is_running(port)


def test_a_port_held_by_something_else_is_a_clear_failure_and_no_user_record(shared_server_port):
    port = shared_server_port
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", port))
        holder.listen()
        with server.project_server(port) as (ok, message, started):
            assert (ok, started) == (False, False)
            assert "ERROR" in message
    users = server.folder_of(port) / "users"
    assert [f.name for f in users.iterdir() if f.name[0].isdigit()] == []
    assert not (users / "started_by_run").exists()
