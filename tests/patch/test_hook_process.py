"""The second wall (hr1_jax/patch/hook_process.py): a real hook process, real kills."""
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from envs import registry
from hr1_jax.patch import compile_patch
from hr1_jax.patch.hook_process import HookProcess, _loads_plain, patch_key

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "hr1_jax" / "patch" / "reference_patches"

# Two equal 2**60-leaf DAGs: one C-level `==` that no statement tick can interrupt.
RUNAWAY = ("def hook(ctx, nb):\n    a = [0]\n    b = [0]\n    for i in range(60):\n        a = [a, a]\n"
           "        b = [b, b]\n    return {'message': str(a == b)}")
COUNTER = ("def hook(ctx, nb):\n    nb['n'] = nb.get('n', 0) + 1\n"
           "    return {'message': 'call ' + str(nb['n']) + ' ' + str(ctx.get('x'))}")


def _patch(*codes, hook="make_pre_hint"):
    return {"benchmark": "webshop", "description": "t",
            "actions": [{"type": "add_code_hook", "hook": hook, "code": c} for c in codes]}


def _host(**kw):
    kw.setdefault("cpu_budget_s", 0.5)
    return HookProcess(**kw)


def _call(host, patch, ctx, nb, hook="make_pre_hint"):
    cp = compile_patch(patch, "webshop", isolation="inline")
    return host.call(cp.key, cp.sources, "webshop", hook, ctx, nb, time_budget_s=2.0, line_budget=2000)


def test_process_and_inline_agree_on_the_reference_replay_states():
    patch = json.loads((REFERENCE / "demo" / "artifacts" / "patch.json").read_text())
    states = json.loads((REFERENCE / "demo" / "artifacts" / "replay_states.json").read_text())
    states = states if isinstance(states, list) else list(states.values())
    inline, process = (compile_patch(patch, "webshop", isolation=i) for i in ("inline", "process"))
    for state in states:
        ctx = state.get("ctx", state) if isinstance(state, dict) else state
        a = [(o.status, o.result) for o in inline.call("on_before_action", ctx, {})]
        b = [(o.status, o.result) for o in process.call("on_before_action", ctx, {})]
        assert a == b and a


def test_the_hook_process_knows_the_parents_registered_benchmarks():
    force = "def hook(ctx, nb):\n    return {'kind': 'force_action', 'action': ctx['a']}"
    with registry.registered("ruled", "ruled_benchmark:BENCHMARK"):   # instance pattern "press ... slot N"
        host = _host()
        try:
            outs = [_call(host, _patch(force, hook="on_before_action"), {"a": a}, {}, hook="on_before_action")[0]
                    for a in ("press slot 3", "press twice")]
        finally:
            host.close()
    assert [(o.status, o.result) for o in outs] == [
        ("invalid_return", None), ("ok", {"kind": "force_action", "action": "press twice"})]


def test_nb_round_trips_and_the_caller_dict_is_updated_in_place():
    host = _host()
    try:
        nb = {}
        outs = [_call(host, _patch(COUNTER), {"x": i}, nb)[0].result for i in range(3)]
        assert outs == [{"message": f"call {i + 1} {i}"} for i in range(3)] and nb == {"n": 3}
    finally:
        host.close()


def test_runaway_c_call_is_killed_counted_and_the_next_call_gets_a_fresh_process():
    host = _host()
    try:
        nb = {"keep": 1}
        [out] = _call(host, _patch(RUNAWAY), {}, nb)
        assert (out.status, out.result, out.killed) == ("timeout", None, True)
        assert nb == {"keep": 1}  # a killed call leaves nb as it was
        assert host.kills == 1
        [ok] = _call(host, _patch(COUNTER), {"x": 7}, {})
        assert ok.status == "ok" and ok.result == {"message": "call 1 7"} and host.starts == 2
    finally:
        host.close()


def test_memory_bomb_within_the_guards_hits_the_address_space_limit():
    # ~110 MB of lists, under the per-call allocation budget, against a 64 MB limit.
    bomb = "def hook(ctx, nb):\n    x = [[0] * 900000 for i in range(15)]\n    return {'message': str(len(x))}"
    host = _host(memory_mb=64)
    try:
        [out] = _call(host, _patch(bomb), {}, {})
        assert out.status == "memory" and out.result is None
        [ok] = _call(host, _patch(COUNTER), {"x": 1}, {})
        assert ok.status == "ok"
    finally:
        host.close()


def test_a_hook_process_that_dies_mid_call_is_an_error_not_a_hang():
    host = _host(cpu_budget_s=60, wall_limit_s=60)
    try:
        _call(host, _patch(COUNTER), {}, {})  # started
        pid = host._proc.pid
        threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
        [out] = _call(host, _patch(RUNAWAY), {}, {})
        assert out.status == "error" and "died" in out.error and out.killed
        assert _call(host, _patch(COUNTER), {}, {})[0].status == "ok"
    finally:
        host.close()


def test_hook_process_dies_with_its_parent(tmp_path):
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(REPO)!r})
        from hr1_jax.patch.hook_process import HookProcess
        from hr1_jax.patch import compile_patch
        host = HookProcess(cpu_budget_s=600, wall_limit_s=600)
        cp = compile_patch({_patch(COUNTER)!r}, "webshop", isolation="inline")
        host.call(cp.key, cp.sources, "webshop", "make_pre_hint", {{}}, {{}}, time_budget_s=2, line_budget=2000)
        print(host._proc.pid, flush=True)
        cp = compile_patch({_patch(RUNAWAY)!r}, "webshop", isolation="inline")
        host.call(cp.key, cp.sources, "webshop", "make_pre_hint", {{}}, {{}}, time_budget_s=600, line_budget=2000)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child_pid = int(parent.stdout.readline())
    time.sleep(0.5)  # the runaway call is in progress
    parent.kill()
    parent.wait()
    for _ in range(200):
        if not _alive(child_pid):
            break
        time.sleep(0.05)
    assert not _alive(child_pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_replies_may_hold_plain_data_only():
    assert _loads_plain(pickle.dumps(({"a": [1, 2.0, None]}, {1, 2}, frozenset(), b"x", ("t",)))) is not None
    for evil in (pickle.dumps(os.system), pickle.dumps(Path("/")), pickle.dumps(range(3))):
        with pytest.raises(pickle.UnpicklingError):
            _loads_plain(evil)


def test_patch_key_is_content_addressed():
    a = patch_key("webshop", {"make_pre_hint": [COUNTER]})
    assert a == patch_key("webshop", {"make_pre_hint": [COUNTER]})
    assert a != patch_key("alfworld", {"make_pre_hint": [COUNTER]})
    assert patch_key("webshop", {"make_pre_hint": ["\ud800"]})  # a lone surrogate hashes



def test_a_hook_process_that_cannot_start_is_infrastructure_not_a_hook_failure():
    from hr1_jax.patch.hook_process import HookProcessUnavailable

    class Broken(HookProcess):
        def _start(self):
            proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            self._installed, self._buf, self._start_rss = set(), bytearray(), 0
            return proc

    host = Broken(cpu_budget_s=5)
    try:
        with pytest.raises(HookProcessUnavailable, match="exit code 3|gone"):
            _call(host, _patch(COUNTER), {}, {})
    finally:
        host.close()


def test_a_bloated_hook_process_is_replaced_after_the_call(monkeypatch):
    from hr1_jax.patch import hook_process
    host = _host()
    try:
        assert _call(host, _patch(COUNTER), {}, {})[0].status == "ok" and host.starts == 1
        monkeypatch.setattr(hook_process, "_rss_bytes", lambda pid: 2**40)  # as if it kept 1 TiB
        for _ in range(hook_process.RSS_CHECK_EVERY):  # calls still answer; the check runs on the last
            assert _call(host, _patch(COUNTER), {}, {})[0].status == "ok"
        monkeypatch.undo()
        assert _call(host, _patch(COUNTER), {}, {})[0].status == "ok" and host.starts == 2
    finally:
        host.close()
