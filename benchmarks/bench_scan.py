"""Loop vs scanned decoder layers (`ModelConfig.scan_layers`): compile time and step time against depth.

    .venv/bin/python benchmarks/bench_scan.py [--depths 2,4,8,16,32] [--repeats 3] [--seq 2048]
        [--small-repeats 5] [--small-hidden 128] [--skip-9b] [--skip-small]

Qwen3.5 layers throughout (the hybrid: every 4th layer full attention, the rest Gated DeltaNet; a
scanned group is 4 layers, so depth 2 is two GDN layers scanned one at a time).
* 9B-shaped (Qwen3.5-9B widths: hidden 4096, MLP 12288, 248K vocab; fp32 params, bf16 activations,
  full remat, as the 9B recipes): the CE + AdamW train step on one [1, --seq] sequence is lowered
  from abstract shapes (`jax.ShapeDtypeStruct`, nothing allocated) and compiled for this CPU.
  Reported: seconds to trace + lower and to compile (medians of --repeats fresh traces).
* Small width (--small-hidden, same pattern and head layout): the same step, compiled and run for
  real on [4, 256] tokens, and a greedy decode of 64 tokens after a 256-token prompt at batch 8
  (prefill + while_loop with the model's cache); compile seconds and median run seconds.
Every row prints loop, scan and scan/loop; the load (`uptime`) is printed before and after.
Compile times count XLA:CPU; an accelerator backend compiles the same HLO with other passes.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)  # a persistent cache hit would time nothing

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402

from hr1_jax.models import ModelConfig, abstract_model, build_model  # noqa: E402
from hr1_jax.models.sampler import generate_tokens  # noqa: E402
from hr1_jax.train.ce_step import make_ce_step  # noqa: E402
from hr1_jax.train.state import TrainState  # noqa: E402

# Qwen3.5-9B text decoder widths (HF config); depth varies.
QWEN3_5_9B = dict(family="qwen3_5_text", vocab_size=248320, hidden_size=4096, intermediate_size=12288,
                  num_heads=16, num_kv_heads=4, head_dim=256, partial_rotary_factor=0.25,
                  linear_num_key_heads=16, linear_num_value_heads=32, linear_key_head_dim=128,
                  linear_value_head_dim=128, tie_word_embeddings=False, param_dtype="float32",
                  dtype="bfloat16", remat=True)


def hybrid_layer_types(depth: int) -> tuple[str, ...]:
    return tuple("full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(depth))


def config(depth: int, scan: bool, **widths) -> ModelConfig:
    return ModelConfig(num_layers=depth, layer_types=hybrid_layer_types(depth), scan_layers=scan, **widths)


def small_widths(hidden: int) -> dict:
    heads = max(1, hidden // 64)
    return dict(family="qwen3_5_text", vocab_size=512, hidden_size=hidden, intermediate_size=3 * hidden,
                num_heads=heads, num_kv_heads=1, head_dim=64, partial_rotary_factor=0.25,
                linear_num_key_heads=heads, linear_num_value_heads=2 * heads, linear_key_head_dim=32,
                linear_value_head_dim=32, tie_word_embeddings=False, gdn_chunk_size=64)


def _step_fn(cfg: ModelConfig, tx, chunk: int):
    """(jit-able train step, abstract TrainState) for `cfg` without allocating its params."""
    graphdef, state = abstract_model(cfg)
    params = state.filter(nnx.Param)
    rest = state.filter(lambda path, x: not isinstance(x, nnx.Param))
    opt = jax.eval_shape(tx.init, params)
    abstract = TrainState(params, opt, jax.ShapeDtypeStruct((), jnp.int32))
    return make_ce_step(graphdef, rest, tx, chunk), abstract


def abstract_batch(batch: int, seq: int) -> dict:
    return {"input_ids": jax.ShapeDtypeStruct((batch, seq), jnp.int32),
            "attention_mask": jax.ShapeDtypeStruct((batch, seq), jnp.bool_),
            "loss_mask": jax.ShapeDtypeStruct((batch, seq), jnp.bool_)}


def lower_and_compile(cfg: ModelConfig, batch: dict, chunk: int) -> tuple[float, float, object]:
    """(trace + lower seconds, compile seconds, executable) for one fresh trace of the step."""
    step, abstract = _step_fn(cfg, optax.adamw(1e-5), chunk)
    t0 = time.perf_counter()
    lowered = jax.jit(step, donate_argnums=0).lower(abstract, batch)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    return t1 - t0, time.perf_counter() - t1, compiled


def median(xs) -> float:
    return statistics.median(xs)


def bench_9b(depths, repeats: int, seq: int) -> list[dict]:
    rows = []
    batch = abstract_batch(1, seq)
    for depth in depths:
        row = {"part": "9b_shaped", "depth": depth}
        for mode in ("loop", "scan"):
            cfg = config(depth, mode == "scan", **QWEN3_5_9B)
            times = [lower_and_compile(cfg, batch, 2048)[:2] for _ in range(repeats)]
            row[f"{mode}_lower_s"] = median(t[0] for t in times)
            row[f"{mode}_compile_s"] = median(t[1] for t in times)
        rows.append(row)
        _print_row(row, ("lower_s", "compile_s"))
    return rows


def _real_batch(vocab: int, batch: int, seq: int) -> dict:
    ids = np.random.default_rng(0).integers(0, vocab, (batch, seq)).astype(np.int32)
    mask = np.ones((batch, seq), bool)
    return {"input_ids": jnp.asarray(ids), "attention_mask": jnp.asarray(mask), "loss_mask": jnp.asarray(mask)}


def _timed_runs(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        out.append(time.perf_counter() - t0)
    return out


def _train_times(cfg: ModelConfig, repeats: int) -> tuple[float, float]:
    """(compile seconds, median step seconds) for a real [4, 256] train step (state not donated,
    so every run starts from the same params)."""
    tx = optax.adamw(1e-4)
    graphdef, params, rest = nnx.split(build_model(cfg, nnx.Rngs(0)), nnx.Param, ...)
    state = TrainState(params, tx.init(params), jnp.zeros((), jnp.int32))
    batch = _real_batch(cfg.vocab_size, 4, 256)
    t0 = time.perf_counter()
    step = jax.jit(make_ce_step(graphdef, rest, tx, 256)).lower(state, batch).compile()
    compile_s = time.perf_counter() - t0
    return compile_s, median(_timed_runs(lambda: step(state, batch), repeats))


def _decode_times(cfg: ModelConfig, repeats: int) -> tuple[float, float]:
    """(compile seconds, median seconds) for a greedy 256 + 64 token decode at batch 8."""
    graphdef, state = nnx.split(build_model(cfg, nnx.Rngs(0)))
    prompt = _real_batch(cfg.vocab_size, 8, 256)["input_ids"]
    args = (graphdef, state, prompt, jnp.ones_like(prompt, bool), jax.random.key(0),
            jnp.full((8,), -1, jnp.int32), jnp.full((4, 8), -1, jnp.int32))
    kw = dict(max_new_tokens=64, greedy=True, cache_dtype=jnp.float32)
    t0 = time.perf_counter()
    jax.block_until_ready(generate_tokens(*args, **kw)["tokens"])  # first call = compile + one run
    compile_s = time.perf_counter() - t0
    runs = _timed_runs(lambda: generate_tokens(*args, **kw)["tokens"], repeats)
    return compile_s - median(runs), median(runs)


def bench_small(depths, repeats: int, hidden: int) -> list[dict]:
    rows = []
    for depth in depths:
        row = {"part": f"small_h{hidden}", "depth": depth}
        for mode in ("loop", "scan"):
            cfg = config(depth, mode == "scan", **small_widths(hidden))
            row[f"{mode}_train_compile_s"], row[f"{mode}_train_step_s"] = _train_times(cfg, repeats)
            row[f"{mode}_decode_compile_s"], row[f"{mode}_decode_s"] = _decode_times(cfg, repeats)
        rows.append(row)
        _print_row(row, ("train_compile_s", "train_step_s", "decode_compile_s", "decode_s"))
    return rows


def _print_row(row: dict, metrics) -> None:
    cells = [f"{row['part']:10s} depth {row['depth']:2d}"]
    for m in metrics:
        loop, scan = row[f"loop_{m}"], row[f"scan_{m}"]
        row[f"ratio_{m}"] = scan / loop
        cells.append(f"{m} loop {loop:8.3f} scan {scan:8.3f} scan/loop {scan / loop:5.2f}")
    print(" | ".join(cells), flush=True)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--depths", default="2,4,8,16,32")
    ap.add_argument("--repeats", type=int, default=3, help="fresh traces per 9B-shaped compile")
    ap.add_argument("--seq", type=int, default=2048, help="9B-shaped step: tokens in the one sequence")
    ap.add_argument("--small-repeats", type=int, default=5)
    ap.add_argument("--small-hidden", type=int, default=128)
    ap.add_argument("--skip-9b", action="store_true")
    ap.add_argument("--skip-small", action="store_true")
    args = ap.parse_args(argv)
    depths = [int(d) for d in args.depths.split(",")]
    print(f"jax {jax.__version__} on {jax.device_count()} x {jax.devices()[0].device_kind}, "
          f"{os.cpu_count()} CPUs; load before: {uptime()}", flush=True)
    rows = []
    if not args.skip_9b:
        rows += bench_9b(depths, args.repeats, args.seq)
    if not args.skip_small:
        rows += bench_small(depths, args.small_repeats, args.small_hidden)
    print(f"load after: {uptime()}")
    print("BENCH_SCAN " + json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
