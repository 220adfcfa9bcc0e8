"""The train step's projection GEMMs one at a time: XLA:CPU's dot (jax, jitted) against torch.matmul
on the same fp32 operands, per projection of `bench_model.py`'s configs and per role, to say which of
them carry the gap between the two frameworks' train steps.

    .venv/bin/python benchmarks/bench_gemm.py [--configs demo,20m] [--tokens 4096] [--repeats 15]
        [--blocks 4]

A projection W [in, out] over N tokens (`--tokens`, bench_model's train batch x seq) has three
GEMMs a step: the forward x W ([N, in] x [in, out]), the input gradient dy W^T, and the weight
gradient x^T dy, which contracts the N tokens into a small [in, out] output. Each layer has seven
projections (q, k, v, o, gate, up, down); the LM head and the attention's own matmuls are left out
(the two frameworks compute those differently: a fused, blocked CE and a blocked attention against
whole logits and a flash kernel). Each framework times a GEMM in blocks of `--repeats` calls, the
blocks alternated `--blocks` times (jax, torch, torch, jax, ...) after one untimed block each, and
its median over all calls is kept: a block keeps each framework's GEMMs apart from the other's
worker threads (torch's OpenMP workers spin for a while after each call), and alternating spreads
a swing of the machine's speed over both alike. Both run under the glibc malloc tunables and
XLA:CPU dispatch the launch scripts run jobs with (`hr1_jax.utils.host_env`). The two products are
compared as a check (max |difference| over max |value|).

Printed: a row per GEMM (GFLOP/s each, ours/torch speed), then per config and role the step's
time in these GEMMs (each GEMM's median times the layers) for each framework and their ratio, and
the fp32 n^3 matmul peaks of the run as bench_model measures them; the load at start and end and
the steal share while timing; one JSON line.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]
from hr1_jax.utils.host_env import configure_jax, job_malloc_requested, reexec_with_job_malloc  # noqa: E402

# glibc reads its tunables at process start: re-exec under them before anything allocates.
if __name__ == "__main__":
    reexec_with_job_malloc()

import jax  # noqa: E402
import numpy as np  # noqa: E402

configure_jax()

from bench_model import CONFIGS, matmul_peak_gflops  # noqa: E402  (benchmarks/, the script's folder)
from machine_state import CpuWindow, load_text  # noqa: E402

ROLES = ("forward", "input grad", "weight grad")


def projections(cfg) -> dict[str, tuple[int, int]]:
    """(in, out) of each of a layer's projections."""
    e, f = cfg.hidden_size, cfg.intermediate_size
    q, kv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    return {"q": (e, q), "k": (e, kv), "v": (e, kv), "o": (q, e), "gate": (e, f), "up": (e, f), "down": (f, e)}


def gemm(role: str, tokens: int, din: int, dout: int):
    """(M, K, N) and the two fp32 operands (numpy) of one role's GEMM, operands laid out as the step has
    them: x [N, in], dy [N, out], W [in, out]; for the transposed roles each framework gets the
    transpose as a view of the stored array (jnp's .T inside the jit, torch's .T)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((tokens, din), np.float32)
    dy = rng.standard_normal((tokens, dout), np.float32)
    w = rng.standard_normal((din, dout), np.float32) * din ** -0.5
    if role == "forward":
        return (tokens, din, dout), (x, w), lambda a, b: a @ b
    if role == "input grad":
        return (tokens, dout, din), (dy, w), lambda a, b: a @ b.T
    return (din, tokens, dout), (x, dy), lambda a, b: a.T @ b


def time_blocks(calls: dict, repeats: int, blocks: int) -> dict[str, list[float]]:
    """Seconds of each call over `blocks` alternated blocks of `repeats` calls (one untimed block
    each first); the order reverses every other block."""
    def block(fn, n):
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return out

    for fn in calls.values():
        block(fn, repeats)
    samples = {name: [] for name in calls}
    for b in range(blocks):
        for name in (list(calls) if b % 2 == 0 else list(calls)[::-1]):
            samples[name] += block(calls[name], repeats)
    return samples


def bench_gemm(role: str, tokens: int, din: int, dout: int, repeats: int, blocks: int) -> dict:
    import torch

    (m, k, n), operands, product = gemm(role, tokens, din, dout)
    jitted = jax.jit(product)
    j_ops = [jax.device_put(a) for a in operands]
    t_ops = [torch.from_numpy(a) for a in operands]
    ours = np.asarray(jitted(*j_ops))
    theirs = product(*t_ops).numpy()
    calls = {"ours": lambda: jitted(*j_ops).block_until_ready(), "torch": lambda: product(*t_ops)}
    samples = time_blocks(calls, repeats, blocks)
    med = {name: statistics.median(s) for name, s in samples.items()}
    flops = 2 * m * k * n
    return {"role": role, "mkn": [m, k, n], "ours_ms": med["ours"] * 1e3, "torch_ms": med["torch"] * 1e3,
            "ours_gflops": flops / med["ours"] / 1e9, "torch_gflops": flops / med["torch"] / 1e9,
            "ratio": med["torch"] / med["ours"],
            "max_rel_diff": float(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="demo,20m", help=f"comma-separated, of {', '.join(CONFIGS)}")
    ap.add_argument("--tokens", type=int, default=4096, help="tokens a step (bench_model: batch 8 x seq 512)")
    ap.add_argument("--repeats", type=int, default=15, help="calls a block")
    ap.add_argument("--blocks", type=int, default=4, help="timed blocks a framework")
    args = ap.parse_args(argv)
    names = args.configs.split(",")
    unknown = [c for c in names if c not in CONFIGS]
    if unknown or args.tokens < 1 or args.repeats < 1 or args.blocks < 1:
        ap.error(f"unknown configs {unknown}" if unknown else "tokens, repeats and blocks must be >= 1")
    try:
        import torch
    except ImportError:
        ap.error("torch is not installed: it is the baseline (a test dependency; `bash launch/setup.sh` installs it)")

    print(f"train-step projection GEMMs, fp32, {args.tokens} tokens, {jax.devices()[0].platform}; ours = jitted "
          f"jnp matmul, torch = torch.matmul ({torch.get_num_threads()} threads); medians of {args.blocks} alternated "
          f"blocks of {args.repeats} calls; job malloc {'on' if job_malloc_requested() else 'off'}")
    load_start, window = load_text(), CpuWindow()
    peak_before = matmul_peak_gflops()
    rows = []
    print("\n| config | projection | role | M x K x N | ours GFLOP/s | torch GFLOP/s | ours/torch | max rel diff |")
    print("|---|---|---|---|--:|--:|--:|--:|")
    for name in names:
        cfg = CONFIGS[name]
        for proj, (din, dout) in projections(cfg).items():
            for role in ROLES:
                r = bench_gemm(role, args.tokens, din, dout, args.repeats, args.blocks)
                r |= {"config": name, "projection": proj, "per_step": cfg.num_layers}
                rows.append(r)
                print(f"| {name} | {proj} | {role} | {' x '.join(map(str, r['mkn']))} | {r['ours_gflops']:.0f} "
                      f"| {r['torch_gflops']:.0f} | {r['ratio']:.2f} | {r['max_rel_diff']:.1e} |", flush=True)
    peak_after = matmul_peak_gflops()

    print("\nA step's time in these GEMMs (each GEMM's median x layers):")
    print("| config | role | ours ms | torch ms | ours/torch |\n|---|---|--:|--:|--:|")
    totals = []
    for name in names:
        for role in ROLES + ("all",):
            sel = [r for r in rows if r["config"] == name and role in (r["role"], "all")]
            ours = sum(r["ours_ms"] * r["per_step"] for r in sel)
            theirs = sum(r["torch_ms"] * r["per_step"] for r in sel)
            totals.append({"config": name, "role": role, "ours_ms": ours, "torch_ms": theirs, "ratio": theirs / ours})
            print(f"| {name} | {role} | {ours:.2f} | {theirs:.2f} | {theirs / ours:.2f} |")
    print(f"\nfp32 n^3 matmul peaks of this run (GFLOP/s, before / after): jax {peak_before['jax']:.0f} / "
          f"{peak_after['jax']:.0f}, torch {peak_before.get('torch', 0):.0f} / {peak_after.get('torch', 0):.0f}")
    print(f"load {load_start} -> {load_text()}; steal {window.steal_text()}")
    print("BENCH_GEMM " + json.dumps({"rows": rows, "totals": totals, "peak_before": peak_before,
                                      "peak_after": peak_after}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
