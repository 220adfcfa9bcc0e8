"""Where a step's time goes on XLA:CPU: our greedy decode loop or CE train step, as `bench_model.py`
builds and runs them, traced once by the JAX profiler, its XLA thunks' self times per step.

    .venv/bin/python benchmarks/profile_step.py [--config 20m] [--what decode|train] [--decode 16x512]
        [--repeats 5] [--top 12]

First the untraced step (median of `--repeats` runs after a warm-up), then one traced run with
XLA:CPU's per-thunk trace events (`--xla_cpu_enable_xprof_traceme`). A thunk's self time is its
duration less that of the thunks nested inside it on the same thread (a conditional's branch, a
loop's body), so nothing is counted twice. Each thunk is matched to its instruction in the
executable's HLO and put in one kind: matmul (dots, YNNPACK dot fusions), reduction, data movement
(copy, transpose, slice, pad, concatenate, dynamic slices and updates, gather, scatter), control
(the self time of loops, conditionals and calls) or elementwise (the rest). Printed per step: the
kinds, the JAX scopes (a loop's body, each branch of a `lax.switch`), and the `--top` groups of
instructions of one kind, shape and JAX op (say, a layer stack's up projections), each as ms and as a
share of all thunk time. Thunks that run at once on the two threads both count, and the profiler
slows the traced run, so the untraced step time is printed beside the traced one; the shares are
what to read. A decode step is the loop's time over its new tokens (prefill included); a train step
is one `ShardedTrainer.step`. CPU only: other backends' traces do not name thunks.
"""
from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The per-thunk trace events must be switched on before jax is imported (bench_model imports it).
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_xprof_traceme=true").strip()

from hr1_jax.utils.host_env import job_malloc_requested, reexec_with_job_malloc  # noqa: E402

if __name__ == "__main__":  # as bench_model: the launch scripts run jobs under these malloc tunables
    reexec_with_job_malloc()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402

from bench_model import CONFIGS, decode_tokens, make_batch, make_trainer, median_time  # noqa: E402
from hr1_jax.models import build_model  # noqa: E402
from machine_state import load_text  # noqa: E402

KINDS = ("matmul", "reduction", "data movement", "control", "elementwise")
# JAX ops (the last part of an instruction's op_name) and HLO opcodes that only move data
_MOVES = {"copy", "transpose", "slice", "dynamic_slice", "dynamic-slice", "dynamic_update_slice",
          "dynamic-update-slice", "pad", "concatenate", "gather", "scatter", "broadcast_in_dim", "broadcast",
          "bitcast", "reshape", "iota"}
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%(\S+) = (\(.*?\)|\S+) ([\w-]+)\(")
_OP_NAME = re.compile(r'op_name="([^"]*)"')


def hlo_instructions(hlo_text: str) -> dict[str, tuple[str, str, str]]:
    """{instruction name: (shape, opcode, JAX op name)} of a compiled module's HLO text."""
    out = {}
    for line in hlo_text.splitlines():
        m = _INSTRUCTION.match(line)
        if m and m.group(1) not in out:
            op = _OP_NAME.search(line)
            out[m.group(1)] = (m.group(2), m.group(3), op.group(1) if op else "")
    return out


def kind_of(name: str, opcode: str, op_name: str) -> str:
    """One of KINDS for an instruction: by its opcode, else by the JAX op at the root of a fusion
    (the last part of its op_name), else by the words XLA built the fusion's name from."""
    root = op_name.rsplit("/", 1)[-1] if op_name else ""
    if opcode in ("dot", "convolution") or root in ("dot_general", "conv_general_dilated"):
        return "matmul"
    if opcode in ("while", "conditional", "call"):
        return "control"
    words = [w for w in re.split(r"[_.]", name.replace("wrapped_", "")) if w and not w.isdigit()
             and w not in ("fusion", "clone")]
    if root.startswith(("reduce", "argm")) or (not root and any(w.startswith("reduce") for w in words)) \
            or opcode.startswith("reduce"):
        return "reduction"
    if root in _MOVES or opcode in _MOVES or (not root and words and all(w in _MOVES for w in words)):
        return "data movement"
    return "elementwise"


def self_times(events: list[dict], thunks: set) -> tuple[dict[str, float], dict[str, int]]:
    """({thunk name: summed self time in µs}, {thunk name: calls}): per thread, each thunk event's
    duration less its directly nested thunk events' (events of other names, such as thread-pool
    waits, are ignored)."""
    by_tid = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("name") in thunks:
            by_tid[e["tid"]].append(e)
    total, calls = collections.Counter(), collections.Counter()
    for evs in by_tid.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[list] = []  # [end, name, child time]
        for e in evs:
            while stack and e["ts"] >= stack[-1][0]:
                _, name, child = stack.pop()
                total[name] -= child
            if stack:
                stack[-1][2] += e["dur"]
            total[e["name"]] += e["dur"]
            calls[e["name"]] += 1
            stack.append([e["ts"] + e["dur"], e["name"], 0.0])
        for _, name, child in stack:
            total[name] -= child
    return dict(total), dict(calls)


def traced_events(run) -> list[dict]:
    """The trace events of one call of `run`, from the profiler's Perfetto JSON."""
    with tempfile.TemporaryDirectory() as d:
        with jax.profiler.trace(d, create_perfetto_trace=True):
            run()
        files = glob.glob(os.path.join(d, "**", "*.trace.json.gz"), recursive=True)
        if not files:
            raise RuntimeError(f"the profiler wrote no Perfetto trace under {d}")
        with gzip.open(files[0]) as f:
            return json.load(f)["traceEvents"]


def decode_step(cfg, rows: int, new: int, prompt_len: int):
    """(run, compiled HLO text, steps per run) of bench_model's greedy decode point rows x new."""
    graphdef, state = nnx.split(build_model(cfg, nnx.Rngs(0)))
    prompt = jnp.asarray(make_batch(cfg.vocab_size, rows, prompt_len)["input_ids"])
    fn = jax.jit(lambda st, p: decode_tokens(graphdef, st, p, cfg, new, greedy=True))
    compiled = fn.lower(state, prompt).compile()
    return (lambda: jax.block_until_ready(compiled(state, prompt))), compiled.as_text(), new


def train_step(cfg, batch_size: int, seq: int):
    """(run, compiled HLO text, 1) of bench_model's CE + AdamW train step."""
    trainer = make_trainer(build_model(cfg, nnx.Rngs(0)))
    batch = make_batch(cfg.vocab_size, batch_size, seq)
    trainer.step(batch)  # compiles
    hlo = trainer._compiled("step", batch).lower(trainer.state, trainer.place(batch)).compile().as_text()
    return (lambda: jax.block_until_ready(trainer.step(batch))), hlo, 1


def profile(run, hlo_text: str, steps: int, repeats: int) -> dict:
    step_s = median_time(run, repeats) / steps   # bench_model's timing: untimed warm-up rounds, then the median
    instructions = hlo_instructions(hlo_text)
    events = traced_events(run)
    selfs, calls = self_times(events, set(instructions))
    return {"step_ms": step_s * 1e3,
            "ops": {name: {"ms": us / 1e3 / steps, "calls": calls[name] / steps,
                           "shape": instructions[name][0], "kind": kind_of(name, *instructions[name][1:]),
                           "op": instructions[name][2]}
                    for name, us in selfs.items()}}


def kind_totals(ops: dict) -> dict[str, float]:
    """ms a step per kind (traced)."""
    return {kind: sum(o["ms"] for o in ops.values() if o["kind"] == kind) for kind in KINDS}


def scope_of(op_name: str) -> str:
    """The JAX scope an instruction ran in: its op_name less the op itself, the outer jit, einsum
    specs and jax.numpy's private jits (numbered branch names stay: each branch of a `lax.switch` is
    its own scope)."""
    parts = [p for p in op_name.split("/")[:-1] if "->" not in p and not p.startswith(("jit(_", "jit(<lambda>)"))]
    return "/".join(parts) or "(top level)"


def scope_totals(ops: dict) -> dict[str, float]:
    """ms a step per JAX scope (traced), largest first."""
    totals = collections.Counter()
    for o in ops.values():
        totals[scope_of(o["op"])] += o["ms"]
    return dict(totals.most_common())


def op_groups(ops: dict) -> list[dict]:
    """Instructions of the same kind, shape and JAX op (a layer's projections, say) summed: ms and
    calls a step, how many instructions; largest first."""
    groups: dict = {}
    for o in ops.values():
        key = (o["kind"], o["shape"], re.sub(r"^(jit\([^)]*\)/)+", "", o["op"]))
        g = groups.setdefault(key, {"kind": key[0], "shape": key[1], "op": key[2], "ms": 0.0, "calls": 0.0,
                                    "instructions": 0})
        g["ms"] += o["ms"]
        g["calls"] += o["calls"]
        g["instructions"] += 1
    return sorted(groups.values(), key=lambda g: -g["ms"])


def print_report(result: dict, top: int) -> None:
    ops = result["ops"]
    total = sum(o["ms"] for o in ops.values())
    print(f"untraced step {result['step_ms']:.3f} ms; traced, thunk self times summed: {total:.3f} ms a step")
    print("\n| kind | ms a step (traced) | share |\n|---|--:|--:|")
    for kind, ms in kind_totals(ops).items():
        print(f"| {kind} | {ms:.3f} | {ms / total:.0%} |")
    print("\n| JAX scope | ms a step (traced) | share |\n|---|--:|--:|")
    for scope, ms in list(scope_totals(ops).items())[:top]:
        print(f"| {scope[-90:]} | {ms:.3f} | {ms / total:.0%} |")
    print("\n| kind | shape | instructions | calls a step | ms a step (traced) | share | JAX op |\n"
          "|---|---|--:|--:|--:|--:|---|")
    for g in op_groups(ops)[:top]:
        shape = g["shape"] if len(g["shape"]) <= 40 else g["shape"][:37] + "..."
        print(f"| {g['kind']} | {shape} | {g['instructions']} | {g['calls']:.2f} | {g['ms']:.3f} "
              f"| {g['ms'] / total:.1%} | {g['op'] if len(g['op']) <= 70 else '...' + g['op'][-67:]} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="20m", choices=sorted(CONFIGS))
    ap.add_argument("--what", default="decode", choices=("decode", "train"))
    ap.add_argument("--decode", default="16x512", help="rows x new tokens")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args(argv)
    if jax.default_backend() != "cpu":
        raise SystemExit(f"profile_step reads XLA:CPU thunk events; this backend is {jax.default_backend()}")
    cfg = CONFIGS[args.config]
    if args.what == "decode":
        try:
            rows, new = (int(x) for x in args.decode.split("x"))
        except ValueError:
            ap.error(f"--decode must be ROWSxNEW, e.g. 16x512 (got {args.decode!r})")
        run, hlo, steps = decode_step(cfg, rows, new, args.prompt)
        what = f"greedy decode {rows} x {new} (prompt {args.prompt})"
    else:
        run, hlo, steps = train_step(cfg, args.batch, args.seq)
        what = f"train step [{args.batch} x {args.seq}]"
    print(f"{args.config} {what}; job malloc {'on' if job_malloc_requested() else 'off'}; "
          f"load {load_text()}", flush=True)
    result = profile(run, hlo, steps, args.repeats)
    print_report(result, args.top)
    print(f"load after: {load_text()}")
    print("PROFILE_STEP " + json.dumps({"config": args.config, "what": args.what, "step_ms": result["step_ms"],
                                        "kinds_ms": kind_totals(result["ops"]),
                                        "groups": op_groups(result["ops"])[:args.top]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
