"""Time to a GRPO trainer's first update, with JAX's persistent compilation cache (the `compile_cache`
config section) off and warm.

  .venv/bin/python benchmarks/bench_compile_cache.py [--config configs/demo.py] [--repeats 5]
                                                     [--lengths 128,256] [--min-compile-seconds 0]

Every sample is a fresh process, as a new GRPO seed's trainer, a later stage or a resumed job is for
the cache: it builds the config's engineer and its GRPO update as `GRPOTrainer` does
(`hr1_jax.train.grpo.update_fns` on the config's mesh) and, per length bucket in `--lengths`,
times the first log-prob pass and the first update on a batch of that length: tracing, compiling
or loading from the cache, and the run. `off` runs without a cache; `warm` runs on a cache folder
that one unmeasured process filled first (with the compiles of at least `--min-compile-seconds`,
by default `compile_cache.min_compile_seconds`). The modes alternate within each round; the table
gives medians over rounds and the ratio off / warm, with the cache hits each warm process counted
(JAX's `/jax/compilation_cache/cache_hits` event), so a warm sample that missed shows. Load
averages are printed before and after, and the steal share over the timed rounds.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from hr1_jax.utils.compile_cache import defaults  # noqa: E402


def child(config_path: str, lengths: list[int], cache_dir: str, min_compile_seconds: float) -> dict:
    """In this (fresh) process, under the cache as a stage runs it (`stage_cache`; "" = off): seconds
    to the first log-prob pass and the first update per length, and the cache hits."""
    from jax import monitoring

    from hr1_jax.utils.compile_cache import stage_cache
    from hr1_jax.utils.host_env import configure_jax

    configure_jax()
    hits = []
    monitoring.register_event_listener(
        lambda name, **kw: hits.append(name) if name == "/jax/compilation_cache/cache_hits" else None)
    section = defaults()
    section.dir, section.min_compile_seconds = cache_dir, min_compile_seconds
    with stage_cache(section, workdir=cache_dir or "."):
        out = first_calls(config_path, lengths)
    return {"lengths": out, "cache_hits": len(hits)}


def first_calls(config_path: str, lengths: list[int]) -> dict:
    """{length: seconds to the first log-prob pass and the first update} of a GRPO update built as
    `GRPOTrainer` builds it."""
    import jax
    import numpy as np
    from flax import nnx

    from hr1_jax.config_files import load_config
    from hr1_jax.models import ModelConfig, build_model
    from hr1_jax.parallel import make_mesh, rules_tuple
    from hr1_jax.train.grpo import update_fns
    from hr1_jax.train.grpo_step import grpo_optimizer
    from hr1_jax.train.state import init_state, split_model, state_sharding
    from hr1_jax.train.step import to_global

    config = load_config(config_path, None)
    g = config.train.grpo
    mesh = make_mesh(config.mesh)
    rules = rules_tuple(config.mesh.train_rules)
    cfg = ModelConfig.from_section(config.model)
    graphdef, params, rest = split_model(build_model(cfg, nnx.Rngs(0), mesh=mesh, rules=rules))
    tx = grpo_optimizer(g)
    sh = state_sharding(tx, params, mesh, rules)
    state = init_state(tx, params, sh)
    step_fn, logp_fn = update_fns(config, graphdef, rest, tx, sh, mesh, cfg.vocab_size)
    rows, mb = g.global_batch // g.iterations, g.micro_batch
    rng = np.random.default_rng(0)
    out = {}
    for length in lengths:
        ids = rng.integers(1, cfg.vocab_size, (rows, length), dtype=np.int32)
        mask = np.ones((rows, length), np.int32)
        t0 = time.perf_counter()
        with jax.set_mesh(mesh):
            old = np.asarray(logp_fn(state.params, ids[:mb], mask[:mb]))
        t1 = time.perf_counter()
        old = np.concatenate([old] * (rows // mb))
        batch = {"input_ids": ids, "attention_mask": mask, "loss_mask": np.ones((rows, length - 1), np.float32),
                 "sampler_logp": old, "advantages": rng.standard_normal(rows).astype(np.float32),
                 "old_logp": old, **({"ref_logp": old} if g.kl_coef > 0 else {})}
        batch = {k: v.reshape((rows // mb, mb) + v.shape[1:]) for k, v in batch.items()}
        with jax.set_mesh(mesh):
            state, metrics = step_fn(state, to_global(batch, mesh))
        jax.block_until_ready(metrics)
        out[str(length)] = {"logprobs_s": t1 - t0, "update_s": time.perf_counter() - t1}
    return out


def run_child(args, cache_dir: str) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--config", args.config,
           "--lengths", args.lengths, "--cache-dir", cache_dir, "--min-compile-seconds", str(args.min_compile_seconds)]
    env = dict(os.environ)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)   # each mode says its own folder
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"child failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=os.path.join(REPO, "configs", "demo.py"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--lengths", default="128,256", help="length buckets, each a new compile of both fns")
    ap.add_argument("--min-compile-seconds", type=float, default=defaults().min_compile_seconds,
                    help="compiles shorter than this are not written (compile_cache.min_compile_seconds)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cache-dir", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    if args.child:
        print(json.dumps(child(args.config, lengths, args.cache_dir, args.min_compile_seconds)))
        return

    from machine_state import CpuWindow, format_share, load_text

    print(f"config {os.path.relpath(args.config, REPO)}; lengths {lengths}; {args.repeats} rounds of fresh "
          f"processes (off, warm); compiles of >= {args.min_compile_seconds} s cached; "
          f"cpu cores {os.cpu_count()}; load {load_text()}", flush=True)
    with tempfile.TemporaryDirectory() as cache:
        run_child(args, cache)   # fills the cache (unmeasured)
        window = CpuWindow()
        samples = {"off": [], "warm": []}
        for _ in range(args.repeats):
            samples["off"].append(run_child(args, ""))
            samples["warm"].append(run_child(args, cache))
        steal = window.steal()
    med = lambda mode, length, part: statistics.median(s["lengths"][str(length)][part] for s in samples[mode])
    rows = []
    print("\n| length | part | off s | warm s | off / warm |\n|--:|---|--:|--:|--:|")
    for length in lengths:
        for part in ("logprobs_s", "update_s"):
            off, warm = med("off", length, part), med("warm", length, part)
            rows.append({"length": length, "part": part, "off_s": off, "warm_s": warm, "ratio": off / warm})
            print(f"| {length} | {part[:-2]} | {off:.2f} | {warm:.2f} | {off / warm:.1f}x |")
    total = {m: statistics.median(sum(v[p] for v in s["lengths"].values() for p in ("logprobs_s", "update_s"))
                                  for s in samples[m]) for m in samples}
    hits = [s["cache_hits"] for s in samples["warm"]]
    print(f"\nall first calls, median total: off {total['off']:.2f} s, warm {total['warm']:.2f} s "
          f"({total['off'] / total['warm']:.1f}x); cache hits per warm process {min(hits)}-{max(hits)}, "
          f"per off process {max(s['cache_hits'] for s in samples['off'])}")
    print(f"load after {load_text()}; steal during the rounds {format_share(steal)}")
    print("BENCH_COMPILE_CACHE " + json.dumps({"rows": rows, "total": total, "warm_hits": hits}))


if __name__ == "__main__":
    main()
