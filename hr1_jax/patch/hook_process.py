"""The second wall: hooks run in a separate hook process, watched from outside.

The sandbox (first wall) bounds what hook code can do line by line, but some single C calls
cannot be interrupted from inside (equality of shared nested structures, sorting long
common-prefix strings, a huge big-integer division) and a one-call memory bomb can exhaust the
host. So every process that runs patched episodes (a rollout worker, a test) starts one hook
process beside it:

* the hook process has an address-space limit (`memory_mb` above its start-up size): a bomb is a
  MemoryError there ("memory"), never an OOM kill of the worker;
* the parent waits for each call with a watchdog: past `cpu_budget_s` of the hook process's CPU
  time or `wall_limit_s` of wall time it is SIGKILLed ("timeout", `killed=True`) and a fresh one
  is started on the next call. Both limits sit far above what any honest hook needs, so the
  deterministic budgets of `runner.py` decide a hook's fate; CPU time is the primary net because
  it barely changes when other processes load the machine;
* nothing is shared with the parent but two pipes; the parent reads replies with a size cap and
  an unpickler that accepts plain data only (no classes), and re-normalises every effect;
* `nb` travels with each call and comes back scrubbed; a killed call leaves it as it was;
* `PYTHONHASHSEED=0` in the hook process, so hooks that iterate over sets give the same order
  in every run.
"""
from __future__ import annotations

import atexit
import hashlib
import io
import json
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time

from envs import registry
from hr1_jax.patch.guards import rss_bytes_of
from hr1_jax.patch.runner import HookOutcome, normalize_hook_result
from hr1_jax.utils.jsonsafe import safe_str

DEFAULT_CPU_BUDGET_S = 1.0
DEFAULT_WALL_LIMIT_S = 10.0
DEFAULT_MEMORY_MB = 1024
MAX_FRAME_BYTES = 32 * 2**20     # a reply above this is a protocol error (nb is capped far lower)
MAX_INSTALLED = 64               # compiled patches kept in one hook process
RSS_CHECK_EVERY = 8              # calls between two looks at the hook process's memory
_HEADER = struct.Struct("!I")
_POLL_S = 0.02                   # watchdog period while a call runs
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class HookProcessError(Exception):
    """The hook process broke the protocol or died; the call counts as a failed hook call."""


class HookProcessUnavailable(RuntimeError):
    """A fresh hook process could not even install a validated patch: infrastructure, not the
    patch's fault. Raised to the episode, which then ends as an infra error (never scored)."""


class _PlainUnpickler(pickle.Unpickler):
    """Replies may hold only what pickle encodes without naming a class: dict, list, tuple,
    set, str, bytes, numbers, None. A compromised hook process cannot make the parent run code."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"hook process sent a non-data object ({module}.{name})")


def _loads_plain(data: bytes):
    return _PlainUnpickler(io.BytesIO(data)).load()


def _frame(obj) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


def patch_key(benchmark: str, sources: dict) -> str:
    """Content address of a patch's hook sources (what the hook process compiles)."""
    blob = json.dumps([benchmark, sources], sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def _rss_bytes(pid: int) -> int:
    return rss_bytes_of(pid) or 0   # 0 where /proc cannot be read: never counts as grown


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process from /proc (0.0 where /proc is unavailable)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


class HookProcess:
    """One hook process and its watchdog; `call` is thread-safe (one call at a time)."""

    def __init__(self, *, cpu_budget_s: float = DEFAULT_CPU_BUDGET_S,
                 wall_limit_s: float = DEFAULT_WALL_LIMIT_S, memory_mb: int = DEFAULT_MEMORY_MB):
        self.cpu_budget_s, self.wall_limit_s, self.memory_mb = cpu_budget_s, wall_limit_s, memory_mb
        self._proc: subprocess.Popen | None = None
        self._installed: set[str] = set()
        self._buf = bytearray()
        self._lock = threading.Lock()
        self.kills = 0
        self.starts = 0

    # --- process lifecycle --------------------------------------------------------------------
    def _start(self) -> subprocess.Popen:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONHASHSEED": "0",
               "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "PYTHONDONTWRITEBYTECODE": "1"}
        if os.environ.get(registry.EXTRA_ENV):  # the child checks against the parent's benchmarks
            env[registry.EXTRA_ENV] = os.environ[registry.EXTRA_ENV]
        proc = subprocess.Popen(
            [sys.executable, "-c", "from hr1_jax.patch.hook_process import child_main; child_main()",
             str(int(self.memory_mb))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
            close_fds=True, start_new_session=True)
        self.starts += 1
        self._installed = set()
        self._buf = bytearray()
        self._start_rss = 0
        self._calls = 0
        return proc

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.kill()
        except OSError:
            pass
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        with self._lock:
            self._kill()

    # --- protocol -----------------------------------------------------------------------------
    def _send(self, obj) -> None:
        try:
            data = _frame(obj)
        except Exception as e:  # ctx or nb that cannot be pickled: this call fails, nothing else
            raise HookProcessError(f"cannot send the call to the hook process: {type(e).__name__}") from None
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except (OSError, ValueError) as e:
            raise HookProcessError(f"hook process is gone ({type(e).__name__})") from None

    def _read_exact(self, n: int, watch: "_Watchdog") -> bytes:
        """n bytes of the reply stream (buffered: one read usually brings a whole small reply)."""
        fd = self._proc.stdout.fileno()
        while len(self._buf) < n:
            ready, _, _ = select.select([fd], [], [], _POLL_S)
            if not ready:
                if watch.expired():
                    raise TimeoutError
                continue
            chunk = os.read(fd, max(n - len(self._buf), 1 << 16))
            if not chunk:
                raise HookProcessError(f"hook process died ({_exit_text(self._proc.wait(timeout=10))})")
            self._buf += chunk
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    def _receive(self, watch: "_Watchdog"):
        (size,) = _HEADER.unpack(self._read_exact(_HEADER.size, watch))
        if size > MAX_FRAME_BYTES:
            raise HookProcessError(f"hook process reply of {size} bytes (cap {MAX_FRAME_BYTES})")
        try:
            return _loads_plain(self._read_exact(size, watch))
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, MemoryError) as e:
            raise HookProcessError(f"malformed reply from the hook process: {e}"[:300]) from None

    def _ensure_running(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            self._kill()
            self._proc = self._start()

    def _request(self, obj):
        watch = _Watchdog(self._proc.pid, self.cpu_budget_s, self.wall_limit_s)
        self._send(obj)
        return self._receive(watch)

    # --- public -------------------------------------------------------------------------------
    def call(self, key: str, sources: dict, benchmark: str, hook_name: str, ctx: dict, nb: dict, *,
             time_budget_s: float, line_budget: int) -> list[HookOutcome]:
        """Run the hooks `sources[hook_name]` of the patch `key` on ctx and nb; nb is updated
        in place with what the hook process returns (left unchanged when the call fails)."""
        n_hooks = len(sources.get(hook_name) or ())
        if not n_hooks:
            return []
        start = time.perf_counter()
        with self._lock:
            try:
                self._ensure_running()
                if key not in self._installed:
                    self._install(key, sources, benchmark)
                reply = self._request(("call", key, hook_name, ctx, nb, float(time_budget_s), int(line_budget)))
            except TimeoutError:
                self.kills += 1
                self._kill()
                return _failed(hook_name, n_hooks, "timeout", "hook process killed by the watchdog "
                               f"(cpu > {self.cpu_budget_s}s or wall > {self.wall_limit_s}s)", start)
            except HookProcessError as e:
                self._kill()
                return _failed(hook_name, n_hooks, "error", str(e), start)
            self._recycle_if_bloated()
        return _outcomes_from_reply(reply, hook_name, n_hooks, ctx, nb, start)

    def _recycle_if_bloated(self) -> None:
        """A hook that allocated a lot leaves memory behind in the hook process; start the next
        call in a fresh one, so a later patch never runs closer to the address-space limit.
        Checked every RSS_CHECK_EVERY calls (a /proc read costs about as much as a small call)."""
        self._calls += 1
        if self._calls % RSS_CHECK_EVERY == 0 and \
                _rss_bytes(self._proc.pid) - self._start_rss > self.memory_mb * 2**20 // 4:
            self._kill()

    def _install(self, key: str, sources: dict, benchmark: str) -> None:
        fresh = not self._installed
        try:
            reply = self._request(("install", key, sources, benchmark))
        except (HookProcessError, TimeoutError) as e:
            if fresh:
                self._kill()
                raise HookProcessUnavailable(f"hook process failed to start or install a patch: {e}") from None
            raise
        if reply != ("installed", key):
            raise HookProcessError(f"hook process could not install the patch: {str(reply)[:200]}")
        if fresh:
            self._start_rss = _rss_bytes(self._proc.pid)
        if len(self._installed) >= MAX_INSTALLED:
            self._installed.clear()  # the child evicts in the same order
        self._installed.add(key)


class _Watchdog:
    """Limits of one request. The hook process's CPU time is first read when a reply is late
    (most replies come within one poll period, and /proc reads cost more than the call); the poll
    period before that read is counted as CPU already spent, so the budget is never exceeded."""

    def __init__(self, pid: int, cpu_budget_s: float, wall_limit_s: float):
        self.pid, self.cpu_budget_s = pid, cpu_budget_s
        self.wall_deadline = time.monotonic() + wall_limit_s
        self.cpu0: float | None = None

    def expired(self) -> bool:
        now = _cpu_seconds(self.pid)
        if self.cpu0 is None:
            self.cpu0 = now - _POLL_S
        return now - self.cpu0 > self.cpu_budget_s or time.monotonic() > self.wall_deadline


def _exit_text(code) -> str:
    if code is None:
        return "closed its pipe"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def _failed(hook_name: str, n: int, status: str, error: str, start: float) -> list[HookOutcome]:
    elapsed = time.perf_counter() - start
    return [HookOutcome(hook_name, status, None, error, elapsed, killed=True) for _ in range(n)]


def _outcomes_from_reply(reply, hook_name: str, n: int, ctx: dict, nb: dict, start: float) -> list[HookOutcome]:
    """Check the reply's shape, re-normalise every effect and apply the returned nb."""
    elapsed = time.perf_counter() - start
    ok = (isinstance(reply, tuple) and len(reply) == 3 and reply[0] in ("done", "failed")
          and (reply[0] == "failed" or (isinstance(reply[1], list) and len(reply[1]) == n and isinstance(reply[2], dict))))
    if not ok:
        return _failed(hook_name, n, "error", "malformed reply from the hook process", start)
    if isinstance(reply, tuple) and len(reply) == 3 and reply[0] == "failed":
        status = reply[1] if reply[1] in ("memory", "error") else "error"
        return [HookOutcome(hook_name, status, None, safe_str(str(reply[2])[:300]), elapsed / n) for _ in range(n)]
    outcomes = []
    for item in reply[1]:
        status, result, error = item if isinstance(item, tuple) and len(item) == 3 else ("error", None, "bad item")
        if status not in ("ok", "none", "error", "timeout", "memory", "invalid_return"):
            status, result = "error", None
        if result is not None:
            result = normalize_hook_result(hook_name, result, ctx)
            if result is None and status == "ok":
                status = "invalid_return"
        error = safe_str(error[:300]) if isinstance(error, str) else ""
        outcomes.append(HookOutcome(hook_name, status, result, error, elapsed / n))
    nb.clear()
    nb.update(reply[2])
    return outcomes


# --------------------------------------------------------------------------- shared instances

_SHARED: dict = {}
_SHARED_LOCK = threading.Lock()


def shared_hook_process(*, cpu_budget_s: float = DEFAULT_CPU_BUDGET_S, wall_limit_s: float = DEFAULT_WALL_LIMIT_S,
                        memory_mb: int = DEFAULT_MEMORY_MB) -> HookProcess:
    """The hook process of this process for these limits (started on its first call)."""
    key = (os.getpid(), float(cpu_budget_s), float(wall_limit_s), int(memory_mb))
    with _SHARED_LOCK:
        host = _SHARED.get(key)
        if host is None:
            host = _SHARED[key] = HookProcess(cpu_budget_s=cpu_budget_s, wall_limit_s=wall_limit_s,
                                              memory_mb=memory_mb)
        return host


@atexit.register
def _close_shared() -> None:
    for key, host in list(_SHARED.items()):
        if key[0] == os.getpid():
            host.close()


# --------------------------------------------------------------------------- child side

def _limit_address_space(memory_mb: int) -> None:
    import resource
    with open("/proc/self/statm") as f:
        vm_bytes = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = vm_bytes + memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _child_install(installed: dict, key: str, sources: dict, benchmark: str):
    from hr1_jax.patch.sandbox import compile_hook
    if len(installed) >= MAX_INSTALLED:
        installed.clear()
    installed[key] = {name: [compile_hook(code, benchmark) for code in codes] for name, codes in sources.items()}
    return ("installed", key)


def _child_call(installed: dict, key, hook_name, ctx, nb, time_budget_s, line_budget):
    from hr1_jax.patch.runner import call_hook
    results = []
    for fn in installed[key].get(hook_name) or ():
        o = call_hook(fn, ctx, nb, hook_name, time_budget_s=time_budget_s, line_budget=line_budget)
        results.append((o.status, o.result, o.error))
    return ("done", results, _thaw(nb))


def _thaw(value):
    """nb as plain containers (a hook may have stored read-only ctx parts in it); nb passed
    `inspect_nb`, so it is bounded in size and depth."""
    if isinstance(value, dict):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_thaw(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_thaw(v) for v in value)
    return value


def _die_with_parent() -> None:
    """SIGKILL this process when its parent dies, even in the middle of a runaway C call."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def child_main() -> None:
    """Loop of the hook process: read a request frame from stdin, answer on stdout."""
    memory_mb = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_MEMORY_MB
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames may reach the parent's pipe
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    from hr1_jax.patch import runner, sandbox, specs  # noqa: F401  (imports before the limit is set)
    specs.instance_patterns()  # imports every registered benchmark's descriptor, also before it
    _limit_address_space(memory_mb)
    installed: dict = {}
    while True:
        header = inp.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return
        request = pickle.loads(inp.read(_HEADER.unpack(header)[0]))  # from our parent only
        try:
            if request[0] == "install":
                reply = _child_install(installed, *request[1:])
            else:
                reply = _child_call(installed, *request[1:])
            data = _frame(reply)
        except MemoryError:
            data = _frame(("failed", "memory", "MemoryError in the hook process"))
        except BaseException as e:  # a compile error or a reply that cannot be pickled
            data = _frame(("failed", "error", f"{type(e).__name__}: {e}"[:300]))
        out.write(data)
        out.flush()
