"""`benchmarks/profile_step.py`: thunk self times (nesting, threads, non-thunk events), the kinds it
sorts XLA instructions into, its HLO reader, and both steps end to end at the tiny config."""
import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import profile_step  # noqa: E402


def _event(name, ts, dur, tid=1):
    return {"ph": "X", "name": name, "ts": ts, "dur": dur, "tid": tid}


def test_self_times_subtract_nested_thunks_per_thread_only():
    events = [
        _event("while.1", 0, 100),            # holds cond.2 (40) and dot.3 (30): self 30
        _event("cond.2", 10, 40),             # holds fusion.4 (25): self 15
        _event("fusion.4", 12, 25),
        _event("SlinkyThreadPool::Await", 15, 5),   # not a thunk: ignored, takes nothing away
        _event("dot.3", 60, 30),
        _event("dot.3", 20, 50, tid=2),       # the same instruction at once on another thread
        _event("fusion.4", 200, 10),          # a second call, after the loop
        {"ph": "i", "name": "fusion.4", "ts": 300, "tid": 1},  # instant events carry no time
    ]
    thunks = {"while.1", "cond.2", "fusion.4", "dot.3"}
    selfs, calls = profile_step.self_times(events, thunks)
    assert selfs == {"while.1": 30, "cond.2": 15, "fusion.4": 35, "dot.3": 80}
    assert calls == {"while.1": 1, "cond.2": 1, "fusion.4": 2, "dot.3": 2}


@pytest.mark.parametrize("name, opcode, op_name, kind", [
    ("ynn_fusion.220", "fusion", "jit(generate_tokens)/while/body/dot_general", "matmul"),
    ("dot_general.201", "dot", "jit(step)/transpose(jvp(bkrs,bkrd->bksd))/dot_general", "matmul"),
    ("cond.53.clone.9", "conditional", "jit(generate_tokens)/while/body/cond", "control"),
    ("while.1", "while", "jit(step)/while", "control"),
    ("ynn_fusion.262", "fusion", "jit(generate_tokens)/while/body/reduce_max", "reduction"),
    ("wrapped_reduce-window.1", "fusion", "", "reduction"),
    ("select_dynamic-update-slice_fusion.3", "fusion", "jit(g)/while/body/dynamic_update_slice", "data movement"),
    ("copy_bitcast_fusion.48", "fusion", "jit(g)/cond/branch_3_fun/transpose", "data movement"),
    ("copy.705", "copy", "", "data movement"),
    ("wrapped_copy.6", "fusion", "", "data movement"),
    ("multiply_add_fusion.3", "fusion", "jit(g)/while/body/add", "elementwise"),
    ("broadcast_select_fusion.34", "fusion", "jit(g)/cond/branch_3_fun/jit(_where)/select_n", "elementwise"),
])
def test_kind_of_sorts_instructions(name, opcode, op_name, kind):
    assert profile_step.kind_of(name, opcode, op_name) == kind


def test_scope_drops_the_op_einsum_specs_and_private_jits():
    scope = profile_step.scope_of
    assert scope("jit(<lambda>)/jit(generate_tokens)/while/body/cond/branch_3_fun/bkrd,bkdl->bkrl/dot_general") \
        == "jit(generate_tokens)/while/body/cond/branch_3_fun"
    assert scope("jit(generate_tokens)/while/body/jit(_where)/select_n") == "jit(generate_tokens)/while/body"
    assert scope("") == "(top level)"


def test_hlo_instructions_reads_a_compiled_module():
    fn = jax.jit(lambda a, b: jnp.tanh(a @ b).sum(axis=1))
    x = jnp.ones((8, 16), jnp.float32)
    text = fn.lower(x, x.T).compile().as_text()
    instructions = profile_step.hlo_instructions(text)
    kinds = {profile_step.kind_of(name, opcode, op) for name, (_, opcode, op) in instructions.items()}
    assert "matmul" in kinds
    assert any(shape.startswith("f32[8,8]") for shape, _, _ in instructions.values())


@pytest.mark.parametrize("what, extra", [("decode", ["--decode", "2x8", "--prompt", "8"]),
                                         ("train", ["--batch", "2", "--seq", "32"])])
def test_profile_step_runs_end_to_end(what, extra):
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "profile_step.py"), "--config", "tiny",
                          "--what", what, "--repeats", "1", "--top", "5", *extra],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("PROFILE_STEP "))
    result = json.loads(line.split(" ", 1)[1])
    assert result["what"] == what and result["step_ms"] > 0
    assert set(result["kinds_ms"]) == set(profile_step.KINDS)
    assert result["kinds_ms"]["matmul"] > 0          # both steps are built on matmuls
    assert 0 < len(result["groups"]) <= 5
    groups_ms = sum(g["ms"] for g in result["groups"])
    assert groups_ms <= sum(result["kinds_ms"].values()) * (1 + 1e-9)
    assert "| kind | ms a step (traced) | share |" in out.stdout
