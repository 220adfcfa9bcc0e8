"""Engineer model throughput: ours (JAX/Flax NNX) vs transformers PyTorch on the same config and weights.

    .venv/bin/python benchmarks/bench_model.py [--configs tiny,20m,qwen35_tiny] [--repeats 5]
        [--batch 8] [--seq 512] [--prompt 64] [--new-tokens 128] [--peak-tflops X]

For each config: the model is built here, exported with `save_hf_checkpoint` and loaded by
`AutoModelForCausalLM` (so both sides use identical weights; the max |Δlogits| is printed as a
check). Then, medians over `--repeats` timed runs after one warm-up/compile run:
* train step: next-token cross-entropy + AdamW on a [batch, seq] batch - ours `ShardedTrainer`
  (jitted, donated, on a mesh over all local devices) vs torch `loss.backward(); AdamW.step()`;
* decode: greedy generation of `--new-tokens` tokens after a `--prompt`-token prompt at `--batch`
  rows, prefill included - ours jitted prefill + while_loop vs HF `generate` (KV cache,
  min_new_tokens = max_new_tokens so both produce the same count).
Analytic FLOPs/token (`hr1_jax.models.flops`) give achieved TFLOP/s and, with a known peak (or
`--peak-tflops`), MFU. Results are printed as a table and one JSON line.

CPU caveat (jaxlib 0.10.2): the batched triangular solve inside the Gated DeltaNet chunked rule can
deadlock XLA:CPU's intra-op pool on 2-core machines once the solve batch (batch x value heads x
chunks) reaches ~64 with concurrent solves; run `qwen35_tiny` on CPU with e.g. `--batch 4 --seq 256`.
On CPU, torch's Qwen3.5 uses its slow reference GDN kernels (no fla/causal-conv1d), so that decode
ratio is not representative.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _threads_from_argv(argv) -> int:
    for i, a in enumerate(argv):
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
    return 0


# Equal CPU budgets for both frameworks: XLA's thread pool must be sized before jax is imported.
THREADS = _threads_from_argv(sys.argv)
if THREADS == 1:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_cpu_multi_thread_eigen=false").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402

from hr1_jax import parallel  # noqa: E402
from hr1_jax.models import ModelConfig, build_model, save_hf_checkpoint  # noqa: E402
from hr1_jax.models.flops import decode_flops_per_token, flops_per_token, param_count  # noqa: E402
from hr1_jax.models.sampler import generate_tokens  # noqa: E402
from hr1_jax.models.train_step import ShardedTrainer  # noqa: E402
from hr1_jax.parallel import config as pconfig  # noqa: E402

CONFIGS = {
    "tiny": ModelConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
                        num_kv_heads=2, head_dim=16, tie_word_embeddings=False),
    # ~20M parameters, most of them in the 32K-vocab embeddings and head.
    "20m": ModelConfig(vocab_size=32000, hidden_size=256, intermediate_size=1024, num_layers=4, num_heads=4,
                       num_kv_heads=2, head_dim=64, tie_word_embeddings=False),
    "qwen35_tiny": ModelConfig(family="qwen3_5_text", vocab_size=256, hidden_size=64, intermediate_size=128,
                               num_layers=4, num_heads=4, num_kv_heads=2, head_dim=16, partial_rotary_factor=0.25,
                               layer_types=("linear_attention",) * 3 + ("full_attention",),
                               linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                               linear_value_head_dim=16, tie_word_embeddings=False),
}

# Dense bf16 peak TFLOP/s per chip (MaxText's table; H100/H200 SXM dense).
PEAK_TFLOPS = {"TPU v4": 275, "TPU v5 lite": 197, "TPU v5e": 197, "TPU v5p": 459, "TPU v5": 459,
               "TPU v6 lite": 918, "TPU v6e": 918, "H100": 989, "H200": 989, "A100": 312}


def peak_tflops(override: float | None) -> float | None:
    if override:
        return override
    kind = jax.devices()[0].device_kind
    for name, peak in PEAK_TFLOPS.items():
        if name.lower() in kind.lower():
            return float(peak) * jax.device_count()
    return None


def median_time(fn, repeats: int) -> float:
    fn()  # warm-up / compile
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def make_batch(vocab: int, batch: int, seq: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, vocab, (batch, seq)).astype(np.int32)
    mask = np.ones((batch, seq), bool)
    return {"input_ids": ids, "attention_mask": mask, "loss_mask": mask.copy()}


def bench_ours(cfg, model, args) -> dict:
    sec = pconfig.defaults()
    mesh = parallel.make_mesh(sec)
    rules = parallel.rules_tuple(sec.train_rules)
    trainer = ShardedTrainer(model, optax.adamw(1e-4), mesh, rules, chunk_size=args.logprob_chunk)
    batch = make_batch(cfg.vocab_size, args.batch, args.seq)
    train_s = median_time(lambda: jax.block_until_ready(trainer.step(batch)), args.repeats)

    graphdef, state = nnx.split(nnx.merge(trainer.graphdef, trainer.state.params, trainer.rest))
    prompt = jnp.asarray(make_batch(cfg.vocab_size, args.batch, args.prompt)["input_ids"])
    pmask = jnp.ones_like(prompt, bool)
    none = jnp.full((8,), -1, jnp.int32)  # no stop ids: every row decodes all new tokens
    no_seqs = jnp.full((4, 8), -1, jnp.int32)

    def decode():
        out = generate_tokens(graphdef, state, prompt, pmask, jax.random.key(0), none, no_seqs,
                              max_new_tokens=args.new_tokens, greedy=True, cache_dtype=jnp.dtype(cfg.dtype))
        jax.block_until_ready(out["tokens"])

    decode_s = median_time(decode, args.repeats)
    return {"train_s": train_s, "decode_s": decode_s}


def bench_torch(path: str, cfg, args, jax_model) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    batch = make_batch(cfg.vocab_size, args.batch, args.seq)
    ids = torch.from_numpy(batch["input_ids"].astype(np.int64))
    # Same weights: compare logits on a short slice before timing anything.
    model.eval()
    with torch.no_grad():
        ref = model(ids[:2, :32]).logits.numpy()
    ours = np.asarray(jax_model(jnp.asarray(batch["input_ids"][:2, :32]))[0])
    max_diff = float(np.abs(ref - ours).max())

    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train():
        loss = model(ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    train_s = median_time(train, args.repeats)
    model.eval()
    prompt = torch.from_numpy(make_batch(cfg.vocab_size, args.batch, args.prompt)["input_ids"].astype(np.int64))

    def decode():
        with torch.no_grad():
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                 max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                                 pad_token_id=0, eos_token_id=None)
        assert out.shape[1] == args.prompt + args.new_tokens

    decode_s = median_time(decode, args.repeats)
    return {"train_s": train_s, "decode_s": decode_s, "max_abs_logit_diff": max_diff}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", default="tiny,20m,qwen35_tiny")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--logprob-chunk", type=int, default=512)
    ap.add_argument("--peak-tflops", type=float, default=None, help="peak of ALL devices together")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--threads", type=int, default=0,
                    help="CPU threads for both frameworks (1 = single-threaded XLA and torch; 0 = defaults)")
    args = ap.parse_args(argv)
    peak = peak_tflops(args.peak_tflops)
    print(f"devices: {jax.device_count()} x {jax.devices()[0].device_kind}; peak "
          f"{peak if peak else 'unknown (MFU n/a)'} TFLOP/s; batch {args.batch} seq {args.seq}; decode "
          f"{args.prompt}+{args.new_tokens}; medians of {args.repeats}; threads {args.threads or 'default'}",
          flush=True)
    rows = []
    for name in args.configs.split(","):
        cfg = CONFIGS[name]
        model = build_model(cfg, nnx.Rngs(0))
        n_params = sum(int(np.size(x)) for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
        assert n_params == param_count(cfg), (n_params, param_count(cfg))
        theirs = {}
        if not args.no_torch:
            with tempfile.TemporaryDirectory() as d:
                save_hf_checkpoint(model, cfg, d)
                theirs = bench_torch(d, cfg, args, model)
        ours = bench_ours(cfg, model, args)
        train_tokens = args.batch * args.seq
        decode_tokens = args.batch * args.new_tokens
        fpt = flops_per_token(cfg, args.seq, training=True)
        row = {"config": name, "params": n_params, "train_flops_per_token": fpt,
               "decode_flops_per_token": decode_flops_per_token(cfg, args.prompt + args.new_tokens // 2),
               "ours_train_tok_s": train_tokens / ours["train_s"], "ours_decode_tok_s": decode_tokens / ours["decode_s"]}
        row["ours_train_tflops"] = row["ours_train_tok_s"] * fpt / 1e12
        row["ours_train_mfu"] = row["ours_train_tflops"] / peak if peak else None
        if theirs:
            row.update(torch_train_tok_s=train_tokens / theirs["train_s"],
                       torch_decode_tok_s=decode_tokens / theirs["decode_s"],
                       max_abs_logit_diff=theirs["max_abs_logit_diff"])
            row["train_ratio"] = row["ours_train_tok_s"] / row["torch_train_tok_s"]
            row["decode_ratio"] = row["ours_decode_tok_s"] / row["torch_decode_tok_s"]
        rows.append(row)
        print(f"{name:12s} params {n_params / 1e6:6.2f}M  train tok/s ours {row['ours_train_tok_s']:9.0f}"
              + (f" torch {row['torch_train_tok_s']:9.0f} ratio {row['train_ratio']:.2f}" if theirs else "")
              + f"  | decode tok/s ours {row['ours_decode_tok_s']:8.0f}"
              + (f" torch {row['torch_decode_tok_s']:8.0f} ratio {row['decode_ratio']:.2f}" if theirs else "")
              + f"  | {fpt / 1e6:.1f} MFLOP/tok train, {row['ours_train_tflops'] * 1e3:.1f} GFLOP/s"
              + (f", MFU {row['ours_train_mfu']:.1%}" if peak else "")
              + (f"  | max|dlogits| {row['max_abs_logit_diff']:.1e}" if theirs else ""), flush=True)
    print("BENCH_MODEL " + json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
