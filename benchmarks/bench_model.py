"""Engineer model throughput: ours (JAX/Flax NNX) vs transformers PyTorch on the same config and weights.

    .venv/bin/python benchmarks/bench_model.py [--configs tiny,demo,20m] [--repeats 5] [--train-repeats 15]
        [--batch 8] [--seq 512] [--prompt 64] [--decode 8x128,16x512] [--peak-tflops X]
        [--skip-train | --skip-decode] [--malloc job|default]

For each config: the model is built here, exported with `save_hf_checkpoint` and loaded by
`AutoModelForCausalLM` (so both sides use identical weights; the max |Δlogits| is printed as a
check). Then, medians over `--repeats` timed rounds (the train step over `--train-repeats`: with five
rounds its ratio of medians and its median of same-round ratios parted by up to 0.07 on the 2-core
boxes, more than the gap the train target judges) after two untimed rounds (the compile, then the
first calls after the other side's first call: `timing.WARMUP_ROUNDS`), ours and torch **interleaved**, in
position-balanced order (ours, torch; torch, ours; ...) so machine load and whatever one side leaves
behind for the next hit both alike; the ratio is the ratio of the medians, and the median of the
same-round ratios is printed beside it:
* train step: next-token cross-entropy + AdamW on a [batch, seq] batch - ours `ShardedTrainer`
  (jitted, donated, on a mesh over all local devices) vs torch `loss.backward(); AdamW.step()`;
* decode, at each `--decode` point BxN (rows x new tokens after a `--prompt`-token prompt, prefill
  included): ours greedy and ours top-p 0.95 at T 0.7 (the GRPO default) against HF greedy
  `generate` (KV cache, min_new_tokens = max_new_tokens so both produce the same count); top-p is
  reported as its time over our greedy time at the same point; beside them, the greedy and HF time per
  new token (prefill included) and our LM head alone at the step's shape ([B, hidden] x head, no
  attention, no cache): the floor of a greedy step that attention and cache work cannot lower, and
  the same head at 2 rows beside it: the share of the head's time that fewer rows do not remove (a
  per-call cost over the weights; at 20m on XLA:CPU, 1.2 of 2.5 ms at 16 rows), the rest being the
  rows' own arithmetic; and the step's bandwidth floor: the bytes a step must read
  (`flops.decode_bytes_per_step`: weights, head, the KV slots the segmented cache attends, GDN state)
  over the fastest streaming read an XLA kernel reached in the same run (`stream_gbps`, before and
  after the configs), since a decode step at these batch sizes is bound by memory traffic, not FLOPs
  (a true floor once a step's bytes exceed the last-level cache, as the 20m model's do on a CPU;
  smaller models' steps can run from cache).
Analytic FLOPs/token (`hr1_jax.models.flops`) give achieved TFLOP/s and, with a known peak (or
`--peak-tflops`), MFU. On a CPU (no table entry) the peak is measured in the same run: the best of
jnp.dot and torch.matmul on fp32 1024^3 and 2048^3 (medians of 5), before and after the configs; train GFLOP/s is
then shown as % of that peak, and under the table each framework's train rate over its own matmul peak (on a box
where XLA's dot library and torch's BLAS differ, the ours/torch train ratio carries that difference too). Both frameworks run under the glibc malloc tunables the launch scripts
run jobs with (`hr1_jax.utils.host_env`: huge pages, freed blocks kept; the script re-execs itself
under them), with XLA:CPU computations on the calling thread as `hr1` then runs them; `--malloc
default` measures plain malloc and JAX's default dispatch. The 1-minute load average (`/proc/loadavg`) is printed at start and end,
and each table row's load column adds the steal share of all CPU time while that config was timed.
Results are printed as markdown tables (benchmarks/README.md's model tables come from one run), then
issue 17's targets with PASS / FAIL from this run's figures (`targets.py`), and one JSON line.

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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from hr1_jax.utils.host_env import configure_jax, job_malloc_requested, reexec_with_job_malloc  # noqa: E402


def _flag_from_argv(argv, name: str, default: str) -> str:
    """The value of `--name V` / `--name=V` in argv, read before argparse runs (for settings that
    must take effect before jax is imported)."""
    for i, a in enumerate(argv):
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
        if a == f"--{name}" and i + 1 < len(argv):
            return argv[i + 1]
    return default


# glibc reads its tunables at process start: re-exec under them before anything allocates.
if __name__ == "__main__" and _flag_from_argv(sys.argv, "malloc", "job") == "job":
    reexec_with_job_malloc()

# Equal CPU budgets for both frameworks: XLA's thread pool must be sized before jax is imported.
THREADS = int(_flag_from_argv(sys.argv, "threads", "0"))
if THREADS == 1:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_cpu_multi_thread_eigen=false").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

configure_jax()   # as `hr1` stages run under the tunables, before JAX's CPU client exists
from flax import nnx  # noqa: E402

from hr1_jax import parallel  # noqa: E402
from hr1_jax.models import ModelConfig, build_model, save_hf_checkpoint  # noqa: E402
from hr1_jax.models.flops import decode_bytes_per_step, flops_per_token, param_count  # noqa: E402
from hr1_jax.models.sampler import generate_tokens  # noqa: E402
from hr1_jax.train.ce_step import ShardedTrainer  # noqa: E402
from hr1_jax.parallel import config as pconfig  # noqa: E402
from machine_state import CpuWindow, format_share, load_1min, load_text  # noqa: E402  (benchmarks/, the script's folder)
from targets import model_lines  # noqa: E402
from timing import WARMUP_ROUNDS, interleaved_samples, pairwise_median, seconds_sampler  # noqa: E402

CONFIGS = {
    # the `hr1 demo` engineer (configs/demo.py): 0.5M parameters, tied embeddings
    "demo": ModelConfig(vocab_size=1024, hidden_size=128, intermediate_size=384, num_layers=2, num_heads=4,
                        num_kv_heads=2, head_dim=32, tie_word_embeddings=True),
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
    return interleaved({"x": fn}, repeats)["x"]


def interleaved(fns: dict, repeats: int) -> dict:
    """Median seconds of each fn over `repeats` rounds, the fns run in turn within a round, the order
    reversed every other round, after `timing.WARMUP_ROUNDS` untimed rounds; plus "pairwise"
    medians of time/first-fn-time per round and the "warmup" rounds' seconds per fn."""
    samplers = {k: seconds_sampler(fn) for k, fn in fns.items()}
    warmup = interleaved_samples(samplers, WARMUP_ROUNDS)
    times = interleaved_samples(samplers, repeats, balanced=True)
    first = times[next(iter(fns))]
    out = {k: statistics.median(v) for k, v in times.items()}
    out["pairwise"] = {k: pairwise_median(v, first) for k, v in times.items()}
    out["warmup"] = warmup
    return out


def matmul_peak_gflops(repeats: int = 5, sizes=(1024, 2048)) -> dict:
    """fp32 n^3 matmul GFLOP/s of jnp.dot and, if installed, torch.matmul: per framework the best of
    the `sizes` (median of `repeats` each), since on a small-cache CPU the largest is not always the
    fastest."""
    try:
        import torch
    except ImportError:
        torch = None
    dot = jax.jit(jnp.dot)
    out = {}
    for n in sizes:
        a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
        runs = {"jax": lambda: dot(a, a).block_until_ready()}
        if torch is not None:
            t = torch.randn(n, n)
            runs["torch"] = lambda: torch.matmul(t, t)
        for name, run in runs.items():
            out[name] = max(out.get(name, 0.0), 2 * n ** 3 / median_time(run, repeats) / 1e9)
    return out


STREAM_MB = 256  # fp32 array the streaming probe reads: far beyond any CPU cache


def stream_gbps(repeats: int = 5, passes: int = 4) -> float:
    """GB/s of a jitted XLA reduction streaming a STREAM_MB fp32 array `passes` times (median of
    `repeats`): the fastest the device's memory feeds an XLA kernel, the denominator of decode's
    bandwidth floor. Each pass scales by its index, so XLA cannot fold the passes into one."""
    a = jnp.ones((STREAM_MB << 18,), jnp.float32)
    read = jax.jit(lambda a: jax.lax.fori_loop(0, passes, lambda i, s: s + jnp.sum(a * i.astype(a.dtype)), 0.0))
    return passes * a.nbytes / median_time(lambda: read(a).block_until_ready(), repeats) / 1e9


def make_batch(vocab: int, batch: int, seq: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, vocab, (batch, seq)).astype(np.int32)
    mask = np.ones((batch, seq), bool)
    return {"input_ids": ids, "attention_mask": mask, "loss_mask": mask.copy()}


def make_trainer(model, chunk_size: int = 1024) -> ShardedTrainer:
    """The train step this script times: AdamW on the default mesh and rules, `chunk_size` tokens per
    fused LM-head + CE chunk (it donates the params it starts from)."""
    sec = pconfig.defaults()
    return ShardedTrainer(model, optax.adamw(1e-4), parallel.make_mesh(sec), parallel.rules_tuple(sec.train_rules),
                          chunk_size=chunk_size)


def ours_fns(cfg, model, args) -> dict:
    """Our timed callables: "train" and, per decode point, ("greedy"|"top_p"|"head"|"head_2rows", point)."""
    graphdef, state = nnx.split(model)
    state = jax.tree.map(jnp.copy, state)  # the trainer donates the params it starts from
    trainer = make_trainer(model, args.logprob_chunk)
    batch = make_batch(cfg.vocab_size, args.batch, args.seq)
    fns = {"train": lambda: jax.block_until_ready(trainer.step(batch))}
    # one jitted LM-head loop per row count, shared by the decode points that time it
    heads = {r: head_fn(model, r, cfg.hidden_size) for r in {2} | {rows for rows, _ in args.decode}}
    for rows, new in args.decode:
        prompt = jnp.asarray(make_batch(cfg.vocab_size, rows, args.prompt)["input_ids"])
        for mode, kw in (("greedy", dict(greedy=True)), ("top_p", dict(temperature=0.7, top_p=0.95, use_top_p=True))):
            def decode(prompt=prompt, new=new, kw=kw):
                jax.block_until_ready(decode_tokens(graphdef, state, prompt, cfg, new, **kw))
            fns[(mode, (rows, new))] = decode
        fns[("head", (rows, new))] = heads[rows]
        fns[("head_2rows", (rows, new))] = heads[2]
    return fns


def decode_tokens(graphdef, state, prompt, cfg, new: int, **sampling):
    """The decode this script times: `generate_tokens` from `prompt` (every token real) with no stop ids
    or sequences, so every row decodes all `new` tokens; returns the tokens [B, new]."""
    return generate_tokens(graphdef, state, prompt, jnp.ones_like(prompt, bool), jax.random.key(0),
                           jnp.full((8,), -1, jnp.int32), jnp.full((4, 8), -1, jnp.int32), max_new_tokens=new,
                           cache_dtype=jnp.dtype(cfg.dtype), **sampling)["tokens"]


HEAD_CALLS = 20  # LM-head calls per timed head run, in one jitted loop (one call is ~0.01-3 ms)


def head_fn(model, rows: int, hidden: int):
    """HEAD_CALLS runs of the LM head alone at a decode step's shape ([rows, hidden] x head) inside one
    jitted loop, as in the decode loop: the part of a greedy step that no attention or cache work
    can remove, to read the decode ratios against. Each call's input differs (h + i), so XLA cannot
    hoist it out of the loop."""
    graphdef, state = nnx.split(model)

    def heads(st, h):
        m = nnx.merge(graphdef, st)
        body = lambda i, acc: acc + m.logits(h + i.astype(h.dtype))[:, 0]
        return jax.lax.fori_loop(0, HEAD_CALLS, body, jnp.zeros((rows,), jnp.float32))

    heads = jax.jit(heads)
    h = jnp.asarray(np.random.RandomState(1).randn(rows, hidden), jnp.float32)
    return lambda: jax.block_until_ready(heads(state, h))


def torch_fns(path: str, cfg, args, jax_model) -> tuple[dict, float]:
    """Torch's timed callables ("train", ("hf_greedy", point)) and the max |Δlogits| against ours."""
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
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train():
        model.train()
        loss = model(ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        model.eval()

    fns = {"train": train}
    for rows, new in args.decode:
        prompt = torch.from_numpy(make_batch(cfg.vocab_size, rows, args.prompt)["input_ids"].astype(np.int64))

        def decode(prompt=prompt, new=new):
            with torch.no_grad():
                out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                     max_new_tokens=new, min_new_tokens=new, pad_token_id=0, eos_token_id=None)
            assert out.shape[1] == args.prompt + new

        fns[("hf_greedy", (rows, new))] = decode
    return fns, max_diff


def bench_config(name: str, args, peak_gflops: float | None) -> dict:
    cfg = CONFIGS[name]
    model = build_model(cfg, nnx.Rngs(0))
    n_params = sum(int(np.size(x)) for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    assert n_params == param_count(cfg), (n_params, param_count(cfg))
    theirs, max_diff = {}, None
    if not args.no_torch:
        with tempfile.TemporaryDirectory() as d:
            save_hf_checkpoint(model, cfg, d)
            theirs, max_diff = torch_fns(d, cfg, args, model)
    ours = ours_fns(cfg, model, args)
    row = {"config": name, "params": n_params, "max_abs_logit_diff": max_diff, "load_start": load_1min()}
    window = CpuWindow()
    if not args.skip_train:
        t = interleaved({"ours": ours["train"], **({"torch": theirs["train"]} if theirs else {})}, args.train_repeats)
        fpt = flops_per_token(cfg, args.seq, training=True)
        tokens = args.batch * args.seq
        row.update(train_repeats=args.train_repeats, train_flops_per_token=fpt, ours_train_tok_s=tokens / t["ours"],
                   ours_train_gflops=tokens / t["ours"] * fpt / 1e9)
        if peak_gflops:
            row["ours_train_peak_frac"] = row["ours_train_gflops"] / peak_gflops
        if theirs:
            row.update(torch_train_tok_s=tokens / t["torch"], torch_train_gflops=tokens / t["torch"] * fpt / 1e9,
                       train_ratio=t["torch"] / t["ours"], train_ratio_pairwise=t["pairwise"]["torch"])
        row["train_warmup_s"] = {k: [round(x, 4) for x in v] for k, v in t["warmup"].items()}
    if not args.skip_decode:
        row["decode"] = []
        for point in args.decode:
            keys = [("greedy", point), ("top_p", point), ("head", point), ("head_2rows", point)] \
                + ([("hf_greedy", point)] if theirs else [])
            t = interleaved({k[0]: (ours | theirs)[k] for k in keys}, args.repeats)
            tokens = point[0] * point[1]
            d = {"batch": point[0], "new_tokens": point[1], "greedy_tok_s": tokens / t["greedy"],
                 "top_p_tok_s": tokens / t["top_p"], "top_p_over_greedy": t["top_p"] / t["greedy"],
                 "greedy_step_ms": t["greedy"] / point[1] * 1e3, "head_ms": t["head"] / HEAD_CALLS * 1e3,
                 "head_2rows_ms": t["head_2rows"] / HEAD_CALLS * 1e3,
                 "read_mb_per_step": decode_bytes_per_step(cfg, point[0], args.prompt, point[1],
                                                           jnp.dtype(cfg.param_dtype).itemsize,
                                                           jnp.dtype(cfg.dtype).itemsize) / 1e6}
            if theirs:
                d.update(hf_tok_s=tokens / t["hf_greedy"], ratio=t["hf_greedy"] / t["greedy"],
                         ratio_pairwise=t["pairwise"]["hf_greedy"], hf_step_ms=t["hf_greedy"] / point[1] * 1e3)
            d["warmup_s"] = {k: [round(x, 4) for x in v] for k, v in t["warmup"].items()}
            row["decode"].append(d)
    row["load_end"], row["steal"] = load_1min(), window.steal()
    return row


def load_cell(row: dict) -> str:
    """A table's load column: the 1-minute load average at the config's start and end, and the steal
    share of all CPU time while it was timed (other guests of the VM host: see machine_state)."""
    loads = "n/a" if row["load_start"] is None else f"{row['load_start']:.1f}-{row['load_end']:.1f}"
    return f"{loads}, steal {format_share(row['steal'])}"


def own_peak_line(rows, measured: dict | None) -> str | None:
    """Each framework's train GFLOP/s over its own fp32 matmul peak of the run (None without both
    peaks or torch rows): where one framework's matmul library is the faster one on a box, the
    ours/torch train ratio carries that gap, and these shares show how each step uses its own."""
    trained = [r for r in rows if "torch_train_gflops" in r]
    if not measured or not {"jax", "torch"} <= measured.keys() or not trained:
        return None
    jax_peak, torch_peak = measured["jax"], measured["torch"]
    shares = ", ".join(f"{r['config']} {r['ours_train_gflops'] / jax_peak:.0%} / {r['torch_train_gflops'] / torch_peak:.0%}"
                       for r in trained)
    return (f"fp32 matmul peaks of this run: jax {jax_peak:.0f}, torch {torch_peak:.0f} GFLOP/s (jax / torch "
            f"{jax_peak / torch_peak:.2f}); train GFLOP/s over the framework's own peak, ours / torch: {shares}")


def print_tables(rows, args, peak_gflops, stream: float, measured: dict | None) -> None:
    if not args.skip_train:
        print(f"\n**Train step** [{args.batch} x {args.seq}] CE + AdamW, medians of {args.train_repeats}, interleaved"
              + (f"; peak {peak_gflops:.0f} GFLOP/s (fp32 matmul, this run)" if peak_gflops else ""))
        print("| config | params | ours tok/s | torch tok/s | ours/torch (pairwise) | ours GFLOP/s | of peak "
              "| torch GFLOP/s | load |")
        print("|---|--:|--:|--:|--:|--:|--:|--:|--|")
        for r in rows:
            frac = f"{r['ours_train_peak_frac']:.0%}" if "ours_train_peak_frac" in r else "n/a"
            torch_part = (f"{r['torch_train_tok_s']:,.0f} | {r['train_ratio']:.2f} ({r['train_ratio_pairwise']:.2f})"
                          if "torch_train_tok_s" in r else "- | -")
            tg = f"{r['torch_train_gflops']:.1f}" if "torch_train_gflops" in r else "-"
            print(f"| {r['config']} | {r['params'] / 1e6:.2f}M | {r['ours_train_tok_s']:,.0f} | {torch_part} "
                  f"| {r['ours_train_gflops']:.1f} | {frac} | {tg} | {load_cell(r)} |")
        line = own_peak_line(rows, measured)
        if line:
            print(line)
    if not args.skip_decode:
        print(f"\n**Decode** (prompt {args.prompt}, prefill included; top-p 0.95 at T 0.7), tok/s, medians of "
              f"{args.repeats}, interleaved; bandwidth floor = bytes a step must read / {stream:.1f} GB/s (the "
              "fastest XLA streaming read of this run)")
        print("| config | B x new | ours greedy | ours top-p | top-p / greedy time | HF greedy | ours/HF (pairwise) "
              "| ms/step ours / HF | bandwidth floor ms (MB/step) | LM head alone ms, B rows (2 rows) | load |")
        print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--|")
        for r in rows:
            for d in r["decode"]:
                hf = (f"{d['hf_tok_s']:,.0f} | {d['ratio']:.2f} ({d['ratio_pairwise']:.2f})" if "hf_tok_s" in d
                      else "- | -")
                steps = f"{d['greedy_step_ms']:.3f} / " + (f"{d['hf_step_ms']:.3f}" if "hf_step_ms" in d else "-")
                print(f"| {r['config']} | {d['batch']} x {d['new_tokens']} | {d['greedy_tok_s']:,.0f} "
                      f"| {d['top_p_tok_s']:,.0f} | {d['top_p_over_greedy']:.2f} | {hf} | {steps} "
                      f"| {d['floor_ms']:.3f} ({d['read_mb_per_step']:.1f}) "
                      f"| {d['head_ms']:.3f} ({d['head_2rows_ms']:.3f}) "
                      f"| {load_cell(r)} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", default="tiny,demo,20m")
    ap.add_argument("--repeats", type=int, default=5, help="timed rounds of each decode point")
    ap.add_argument("--train-repeats", type=int, default=15, help="timed rounds of the train step")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--decode", default="8x128,16x512", help="decode points BxN: rows x new tokens")
    ap.add_argument("--logprob-chunk", type=int, default=1024, help="tokens per fused LM-head + CE chunk")
    ap.add_argument("--peak-tflops", type=float, default=None, help="peak of ALL devices together")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--skip-decode", action="store_true")
    ap.add_argument("--threads", type=int, default=0,
                    help="CPU threads for both frameworks (1 = single-threaded XLA and torch; 0 = defaults)")
    ap.add_argument("--malloc", choices=("job", "default"), default="job",
                    help="the launch scripts' glibc malloc tunables (huge pages, freed blocks kept) or plain")
    args = ap.parse_args(argv)
    args.decode = [tuple(int(x) for x in p.split("x")) for p in args.decode.split(",") if p]
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    peak = peak_tflops(args.peak_tflops)
    measured = None if peak else matmul_peak_gflops()
    stream = stream_gbps()
    print(f"devices: {jax.device_count()} x {jax.devices()[0].device_kind}; peak "
          + (f"{peak} TFLOP/s" if peak else f"measured fp32 matmul GFLOP/s {measured}")
          + f"; train batch {args.batch} seq {args.seq}, medians of {args.train_repeats}; decode prompt {args.prompt}, "
          f"points {args.decode}, medians of {args.repeats}; threads {args.threads or 'default'}; job malloc "
          f"{'on' if job_malloc_requested() else 'off'}; streaming read {stream:.1f} GB/s; load {load_text()}",
          flush=True)
    rows = []
    for name in args.configs.split(","):
        peak_gflops = peak * 1e3 if peak else max(measured.values())
        rows.append(bench_config(name, args, peak_gflops))
        print("BENCH_MODEL_ROW " + json.dumps(rows[-1]), flush=True)
    if measured:
        after = matmul_peak_gflops()
        print(f"matmul GFLOP/s after: {after}; load {load_text()}")
        measured = {k: max(v, after.get(k, 0)) for k, v in measured.items()}
        for r in rows:  # % of the best peak seen in the run
            if "ours_train_gflops" in r:
                r["ours_train_peak_frac"] = r["ours_train_gflops"] / max(measured.values())
    stream_after = stream_gbps()
    print(f"streaming read GB/s after: {stream_after:.1f}")
    stream = max(stream, stream_after)
    for r in rows:  # against the best streaming rate seen in the run
        for d in r.get("decode", []):
            d["floor_ms"] = d["read_mb_per_step"] / stream
    print_tables(rows, args, peak * 1e3 if peak else max(measured.values()), stream, measured)
    verdicts = model_lines(rows)
    print("\ntargets (issue 17):\n" + "\n".join(f"  {line}" for line in verdicts))
    print("BENCH_MODEL " + json.dumps({"peak_gflops": measured, "stream_gbps": stream, "rows": rows,
                                      "targets": verdicts}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
