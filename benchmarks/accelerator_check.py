"""Accelerator check on one chip: the largest Qwen3.5-shaped model that trains there with remat and bf16.

    bash benchmarks/accelerator_check.sh [--tiny] [--model 9b|4b|4b_16l|4b_8l] [--param-dtype float32]

runs three parts (separate processes, so JAX and torch never hold the chip's memory at once):
  jax     train-step tokens/s and MFU (the chip's dense bf16 peak from bench_model's table, else a
          measured bf16 matmul), sampler decode tokens/s at batch 8 and 32 with a 2048-token prompt
          and 1024 new tokens (greedy, prefill included), compile times, peak device memory; then
          the train step's causal attention alone at the same rows (bf16, fwd+bwd): the chip's fused
          kernel (cuDNN on a GPU, splash on a TPU; on a CPU XLA's reference kernel through the cuDNN
          call's library function) against the blocked XLA path, times and largest differences;
          writes the plan (model, shapes) and results to --out.
  torch   the same train step and decode in transformers PyTorch on the same chip, for the plan in
          --plan (random init from the same config: throughput does not depend on the weights);
          a clear "skipped" record when torch (or its CUDA) is missing.
  report  the table and one ACCELERATOR_CHECK {json} line.

The model, step and decode are bench_model.py's: `build_model` + `ShardedTrainer` (CE + AdamW,
jitted, donated) and the jitted `generate_tokens` prefill + while_loop. Without an accelerator (or
with --tiny) everything runs at a tiny size, so the script itself is tested on CPU.
"""
from __future__ import annotations

import argparse
import gc
import glob
import importlib.util
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

# bench_model puts the repo on sys.path and keeps transformers offline.
from bench_model import CONFIGS, PEAK_TFLOPS, make_batch

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402

from hr1_jax import parallel  # noqa: E402
from hr1_jax.models import ModelConfig, attention, build_model, fused_attention  # noqa: E402
from hr1_jax.models.flops import flops_per_token, param_count  # noqa: E402
from hr1_jax.models.sampler import generate_tokens  # noqa: E402
from hr1_jax.train.ce_step import ShardedTrainer  # noqa: E402
from hr1_jax.parallel import config as pconfig  # noqa: E402

_HYBRID = ("linear_attention",) * 3 + ("full_attention",)
# The released Qwen3.5-9B text config (vision tower and MTP head left out).
_QWEN3_5_9B = ModelConfig(
    family="qwen3_5_text", vocab_size=248320, hidden_size=4096, intermediate_size=12288, num_layers=32,
    num_heads=16, num_kv_heads=4, head_dim=256, rope_theta=1e7, partial_rotary_factor=0.25,
    layer_types=_HYBRID * 8, linear_num_key_heads=16, linear_num_value_heads=32, linear_key_head_dim=128,
    linear_value_head_dim=128, tie_word_embeddings=False)
_QWEN3_5_4B = _QWEN3_5_9B.replace(hidden_size=2560, intermediate_size=9216, tie_word_embeddings=True)
# Largest first; the 4B shape with fewer layers for chips that cannot hold the 4B.
CANDIDATES = {
    "9b": _QWEN3_5_9B,
    "4b": _QWEN3_5_4B,
    "4b_16l": _QWEN3_5_4B.replace(num_layers=16, layer_types=_HYBRID * 4),
    "4b_8l": _QWEN3_5_4B.replace(num_layers=8, layer_types=_HYBRID * 2),
}
# One [3 x GDN, full attention] group, scanned like the full-size shapes.
TINY = CONFIGS["qwen35_tiny"].replace(scan_layers=True)

FULL_SHAPES = dict(train_batch=4, seq=2048, decode_batches=(8, 32), prompt=2048, new_tokens=1024, repeats=3)
# Small decode batches on CPU: XLA:CPU's batched triangular solve can deadlock on 2 cores from ~64
# solves (bench_model.py's caveat).
TINY_SHAPES = dict(train_batch=2, seq=64, decode_batches=(2, 4), prompt=32, new_tokens=16, repeats=1)
LOGPROB_CHUNK = 512
MEMORY_HEADROOM = 0.9   # use at most this share of the chip's memory limit when picking the model


def _first_and_median(fn, repeats: int) -> tuple[float, float]:
    """(seconds of the first call, which includes compilation, and the median of `repeats` more)."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return first, statistics.median(times)


def _is_oom(err: Exception) -> bool:
    text = str(err)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


# ---- the jax part ------------------------------------------------------------------------------

def training_config(base: ModelConfig, param_dtype: str, scan_layers: bool | None) -> ModelConfig:
    """bf16 activations, full remat; scan_layers None = the model's own rule (scan from 8 layers)."""
    cfg = base.replace(dtype="bfloat16", param_dtype=param_dtype, remat=True, remat_policy="full")
    return cfg if scan_layers is None else cfg.replace(scan_layers=scan_layers)


def train_bytes_estimate(cfg: ModelConfig, batch: int, seq: int) -> float:
    """Rough peak of one train step: params, grads and both AdamW moments in the param dtype plus a
    transient update; each layer's bf16 input (kept by remat) and one layer's recompute; the loss's
    fp32 logits blocks (forward, softmax, gradient)."""
    item = 2 if cfg.param_dtype == "bfloat16" else 4
    tokens = batch * seq
    activations = 2 * tokens * cfg.hidden_size * cfg.num_layers + 8 * tokens * cfg.intermediate_size
    logits = 3 * 4 * batch * min(LOGPROB_CHUNK, seq) * cfg.vocab_size
    return 5 * item * param_count(cfg) + activations + logits


def candidates_to_try(forced: str | None, limit: int | None, shapes: dict, param_dtype: str) -> list[str]:
    """Candidate names from the largest whose estimate fits the memory limit (all when it is unknown)."""
    if forced:
        return [forced]
    names = list(CANDIDATES)
    if limit is None:
        return names
    fits = [n for n in names if train_bytes_estimate(training_config(CANDIDATES[n], param_dtype, None),
                                                     shapes["train_batch"], shapes["seq"]) <= MEMORY_HEADROOM * limit]
    return fits or names[-1:]


def chip_peak_tflops(device, override: float | None) -> tuple[float, str]:
    """(dense bf16 TFLOP/s of one chip, where the number comes from)."""
    if override:
        return override, "--peak-tflops"
    for name, peak in PEAK_TFLOPS.items():
        if name.lower() in device.device_kind.lower():
            return float(peak), f"table ({name})"
    return measured_matmul_tflops(device), "measured bf16 matmul (device kind not in the table)"


def measured_matmul_tflops(device, n: int | None = None) -> float:
    n = n or (8192 if device.platform != "cpu" else 512)
    a = jax.device_put(jnp.ones((n, n), jnp.bfloat16), device)
    matmul = jax.jit(lambda x, y: x @ y)
    _, seconds = _first_and_median(lambda: jax.block_until_ready(matmul(a, a)), 10)
    return 2.0 * n ** 3 / seconds / 1e12


def memory_stats(device) -> dict:
    stats = device.memory_stats() or {}
    return {k: stats[k] for k in ("peak_bytes_in_use", "bytes_limit", "bytes_in_use") if k in stats}


def build_trainer(cfg: ModelConfig, device) -> ShardedTrainer:
    sec = pconfig.defaults()
    mesh = parallel.make_mesh(sec, devices=[device])
    rules = parallel.rules_tuple(sec.train_rules)
    return ShardedTrainer(build_model(cfg, nnx.Rngs(0)), optax.adamw(1e-5), mesh, rules, chunk_size=LOGPROB_CHUNK)


def time_train(trainer: ShardedTrainer, cfg: ModelConfig, shapes: dict) -> dict:
    batch = make_batch(cfg.vocab_size, shapes["train_batch"], shapes["seq"])
    losses = []

    def step():
        losses.append(float(jax.block_until_ready(trainer.step(batch))["loss"]))

    first, median = _first_and_median(step, shapes["repeats"])
    tokens = shapes["train_batch"] * shapes["seq"]
    return {"step_s": median, "compile_s": max(first - median, 0.0), "tokens_per_s": tokens / median,
            "loss_finite": bool(np.isfinite(losses).all())}


def time_decode(graphdef, state, cfg: ModelConfig, batch: int, shapes: dict) -> dict:
    prompt = jnp.asarray(make_batch(cfg.vocab_size, batch, shapes["prompt"])["input_ids"])
    no_stop_ids = jnp.full((8,), -1, jnp.int32)   # every row decodes all new tokens
    no_stop_seqs = jnp.full((4, 8), -1, jnp.int32)
    lengths = []

    def decode():
        out = generate_tokens(graphdef, state, prompt, jnp.ones_like(prompt, bool), jax.random.key(0),
                              no_stop_ids, no_stop_seqs, max_new_tokens=shapes["new_tokens"], greedy=True,
                              cache_dtype=jnp.dtype(cfg.dtype))
        lengths.append(np.asarray(out["lengths"]))

    first, seconds = _first_and_median(decode, 1)
    return {"batch": batch, "seconds": seconds, "compile_s": max(first - seconds, 0.0),
            "tokens_per_s": batch * shapes["new_tokens"] / seconds,
            "all_rows_full_length": bool((lengths[-1] == shapes["new_tokens"]).all())}


def train_largest(models: dict[str, ModelConfig], args, device, shapes: dict):
    """Train steps on the first model that does not run out of memory: (name, cfg, trainer, result)."""
    last = list(models)[-1]
    scan = {"on": True, "off": False}.get(args.scan_layers)
    for name, base in models.items():
        cfg = training_config(base, args.param_dtype, scan)
        try:
            trainer = build_trainer(cfg, device)
            return name, cfg, trainer, time_train(trainer, cfg, shapes)
        except Exception as err:  # noqa: BLE001 - only an out-of-memory moves on to a smaller model
            if not _is_oom(err) or name == last:
                raise
            print(f"[check] {name}: out of memory, trying the next smaller shape", flush=True)
            trainer = None
            gc.collect()
    raise AssertionError("unreachable: the last model re-raises")


def unusable_accelerator(platform: str) -> str | None:
    """An accelerator on this host that jax is not using (its plugin missing), or None."""
    if platform != "cpu" or os.environ.get("JAX_PLATFORMS") == "cpu":
        return None
    if shutil.which("nvidia-smi"):
        return "an NVIDIA GPU is present but jax has no CUDA backend: run DEVICE=cuda bash launch/setup.sh"
    if glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"):
        return "TPU chips are present but jax has no TPU backend: run DEVICE=tpu bash launch/setup.sh"
    return None


def run_jax(args, save) -> dict:
    """The jax part; `save(result)` after the train step and after each decode batch, so a part cut
    short by its time limit still leaves what it measured."""
    device = jax.devices()[0]
    problem = unusable_accelerator(device.platform)
    if problem and not args.tiny:
        raise SystemExit(f"[check] {problem} (or pass --tiny, or JAX_PLATFORMS=cpu, for the CPU run)")
    tiny = args.tiny or device.platform == "cpu"
    shapes = TINY_SHAPES if tiny else FULL_SHAPES
    if tiny:
        models = {"tiny": TINY}
    else:
        names = candidates_to_try(args.model, memory_stats(device).get("bytes_limit"), shapes, args.param_dtype)
        models = {n: CANDIDATES[n] for n in names}
    peak, peak_source = chip_peak_tflops(device, args.peak_tflops)
    print(f"[check] {device.device_kind} ({device.platform}); peak {peak:.1f} TFLOP/s from {peak_source}; "
          f"trying {list(models)}", flush=True)
    name, cfg, trainer, train = train_largest(models, args, device, shapes)
    train["mfu"] = train["tokens_per_s"] * flops_per_token(cfg, shapes["seq"], training=True) / (peak * 1e12)
    result = {"device_kind": device.device_kind, "platform": device.platform, "tiny": tiny, "model": name,
              "params": param_count(cfg), "scan_layers": cfg.scan_layers, "hf_config": cfg.to_hf_dict(),
              "shapes": shapes, "peak_tflops": peak, "peak_source": peak_source, "train": train, "decode": [],
              "memory_after_train": memory_stats(device)}
    save(result)
    # Decode needs the params only: dropping the AdamW moments leaves room for the caches.
    graphdef, state = nnx.split(nnx.merge(trainer.graphdef, trainer.state.params, trainer.rest))
    del trainer
    gc.collect()
    for batch in shapes["decode_batches"]:
        result["decode"].append(decode_or_error(graphdef, state, cfg, batch, shapes))
        result["memory_at_end"] = memory_stats(device)
        save(result)
    del graphdef, state
    gc.collect()
    try:
        result["attention"] = compare_attention(cfg, shapes)
    except Exception as err:  # noqa: BLE001  (a kernel the chip refuses: the rest stands)
        result["attention"] = {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"}
    save(result)
    return result


def compare_attention(cfg: ModelConfig, shapes: dict) -> dict:
    """fwd+bwd of the causal attention at [train_batch, seq] rows of the model's heads, bf16, right-padded
    rows of several lengths: the fused kernel of this backend (`model.attention_impl` cudnn on a GPU,
    splash on a TPU, xla elsewhere) and the blocked path, their ms and the largest differences over
    real positions, relative to the largest value (bf16 rounds each side's output and probabilities:
    ~4 * 2^-8 between two correct kernels)."""
    library = {"gpu": "cudnn", "tpu": "splash"}.get(jax.default_backend(), "xla")
    b, t, h, kvh, d = shapes["train_batch"], shapes["seq"], cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    keys = jax.random.split(jax.random.key(0), 4)
    q = jax.random.normal(keys[0], (b, t, h, d), jnp.bfloat16)
    k, v = (jax.random.normal(key, (b, t, kvh, d), jnp.bfloat16) for key in keys[1:3])
    cot = jax.random.normal(keys[3], (b, t, h, d), jnp.float32)
    lengths = t - jnp.arange(b) * (t // (2 * b))
    valid = jnp.arange(t)[None] < lengths[:, None]
    real = valid[..., None, None]
    blocked = lambda q, k, v: attention.causal_attention(q, k.swapaxes(1, 2), v.swapaxes(1, 2), valid,
                                                         cfg.attn_chunk_size)
    fused = lambda q, k, v: fused_attention.causal_attention(q, k, v, valid, library, lambda: blocked(q, k, v))
    runs = {}
    for name, fn in (("blocked", blocked), ("library", fused)):
        step = jax.jit(jax.value_and_grad(lambda q, k, v, fn=fn: jnp.sum(fn(q, k, v).astype(jnp.float32) * cot * real),
                                          argnums=(0, 1, 2)))
        out = jax.jit(lambda q, k, v, fn=fn: fn(q, k, v).astype(jnp.float32) * real)(q, k, v)
        results = []
        first, median = _first_and_median(lambda: results.append(jax.block_until_ready(step(q, k, v))),
                                          shapes["repeats"])
        runs[name] = (out, results[-1][1], first, median)
    rel = lambda x, y: float(jnp.max(jnp.abs(x.astype(jnp.float32) - y.astype(jnp.float32))) /
                             jnp.max(jnp.abs(y.astype(jnp.float32))))
    (out_b, grads_b, first_b, ms_b), (out_l, grads_l, first_l, ms_l) = runs["blocked"], runs["library"]
    return {"library": library, "rows": [b, t], "heads": [h, kvh, d], "lengths": [int(n) for n in lengths],
            "blocked_ms": ms_b * 1e3, "library_ms": ms_l * 1e3, "compile_s": first_b + first_l - ms_b - ms_l,
            "max_rel_diff_out": rel(out_l, out_b), "max_rel_diff_grad": max(map(rel, grads_l, grads_b))}


def decode_or_error(graphdef, state, cfg, batch: int, shapes: dict) -> dict:
    """A failed decode batch (out of memory, a sampler error) is reported, keeping the train numbers."""
    try:
        return time_decode(graphdef, state, cfg, batch, shapes)
    except Exception as err:  # noqa: BLE001
        return {"batch": batch, "error": "out of memory" if _is_oom(err) else
                f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"}


# ---- the torch part ----------------------------------------------------------------------------

def torch_unavailable(platform: str) -> str | None:
    """Why the torch comparison cannot run on this chip, or None."""
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed (DEVICE=cuda bash launch/setup.sh alfworld,eval,test installs it)"
    import torch
    if platform == "gpu" and not torch.cuda.is_available():
        return f"this torch ({torch.__version__}) has no CUDA"
    if platform not in ("gpu", "cpu"):
        return f"no torch comparison on {platform}"
    return None


def torch_model(plan: dict, device: str):
    """Params in our param dtype; bf16 compute (autocast) when they are fp32 master weights, as ours."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    hf = dict(plan["hf_config"])
    config = AutoConfig.for_model(hf.pop("model_type"), **hf)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, hf["dtype"]))
    autocast = torch.autocast(device, dtype=torch.bfloat16, enabled=hf["dtype"] == "float32")
    return model, autocast


def torch_train(model, autocast, plan: dict, device: str, sync) -> dict:
    import torch

    shapes = plan["shapes"]
    ids = torch.from_numpy(make_batch(plan["hf_config"]["vocab_size"], shapes["train_batch"], shapes["seq"])
                           ["input_ids"].astype(np.int64)).to(device)
    model.config.use_cache = False
    model.activation_checkpointing_enable()  # the same full remat as ours
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def step():
        with autocast:
            loss = model(ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()

    first, median = _first_and_median(step, shapes["repeats"])
    del opt
    return {"step_s": median, "first_step_s": first,
            "tokens_per_s": shapes["train_batch"] * shapes["seq"] / median}


def torch_decode(model, autocast, plan: dict, batch: int, device: str, sync) -> dict:
    import torch

    shapes = plan["shapes"]
    prompt = torch.from_numpy(make_batch(plan["hf_config"]["vocab_size"], batch, shapes["prompt"])
                              ["input_ids"].astype(np.int64)).to(device)
    model.eval()
    model.config.use_cache = True

    def generate(n):
        with torch.no_grad(), autocast:
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                 max_new_tokens=n, min_new_tokens=n, pad_token_id=0, eos_token_id=None)
        sync()
        return out

    generate(4)  # warm-up: kernels and allocator, without paying for a whole second decode
    t0 = time.perf_counter()
    out = generate(shapes["new_tokens"])
    seconds = time.perf_counter() - t0
    return {"batch": batch, "seconds": seconds, "tokens_per_s": batch * shapes["new_tokens"] / seconds,
            "all_rows_full_length": out.shape[1] == shapes["prompt"] + shapes["new_tokens"]}


def run_torch(plan: dict, save) -> dict:
    """The torch part for the jax part's plan; `save(result)` after each measurement (as run_jax)."""
    reason = torch_unavailable(plan["platform"])
    if reason:
        return save({"skipped": reason})
    import torch

    device = "cuda" if plan["platform"] == "gpu" else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    model, autocast = torch_model(plan, device)
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
              "gdn_kernels": {pkg: importlib.util.find_spec(pkg) is not None for pkg in ("fla", "causal_conv1d")},
              "train": torch_train(model, autocast, plan, device, sync), "decode": []}
    if device == "cuda":
        result["train_peak_bytes"] = torch.cuda.max_memory_allocated()
    save(result)
    gc.collect()
    for batch in plan["shapes"]["decode_batches"]:
        result["decode"].append(torch_decode(model, autocast, plan, batch, device, sync))
        save(result)
    return result


# ---- the report --------------------------------------------------------------------------------

def _gib(n) -> str:
    return f"{n / 2 ** 30:.1f} GiB" if n is not None else "n/a"


def _ratio(ours: dict, theirs: dict | None) -> str:
    if not theirs or "tokens_per_s" not in ours or "tokens_per_s" not in theirs:
        return ""
    return f" | torch {theirs['tokens_per_s']:10,.0f} tok/s | ours/torch {ours['tokens_per_s'] / theirs['tokens_per_s']:.2f}"


def report(ours: dict, theirs: dict | None) -> dict:
    s, train = ours["shapes"], ours["train"]
    print(f"device {ours['device_kind']} ({ours['platform']}{', tiny size' if ours['tiny'] else ''}); model "
          f"{ours['model']} Qwen3.5-shaped, {ours['params'] / 1e9:.2f}B params, bf16 activations, "
          f"{ours['hf_config']['dtype']} params, full remat, layer {'scan' if ours['scan_layers'] else 'loop'}; "
          f"peak {ours['peak_tflops']:.1f} TFLOP/s "
          f"({ours['peak_source']})")
    print(f"train  [{s['train_batch']} x {s['seq']}]  ours {train['tokens_per_s']:10,.0f} tok/s, MFU "
          f"{train['mfu']:.1%}, compile {train['compile_s']:.0f} s" + _ratio(train, (theirs or {}).get("train")))
    ours_decodes = {d["batch"]: d for d in ours["decode"]}
    torch_decodes = {d["batch"]: d for d in (theirs or {}).get("decode", [])}
    for batch in s["decode_batches"]:
        head, d = f"decode [b{batch}, {s['prompt']}+{s['new_tokens']}]", ours_decodes.get(batch)
        if d is None or "error" in d:
            print(f"{head}  ours: {d['error'] if d else 'not measured (the jax part stopped before it)'}")
            continue
        print(f"{head}  ours {d['tokens_per_s']:10,.0f} tok/s, compile {d['compile_s']:.0f} s"
              + _ratio(d, torch_decodes.get(batch)))
    att = ours.get("attention")
    if att is None or "error" in att:
        print(f"attention  {att['error'] if att else 'not measured (the jax part stopped before it)'}")
    else:
        print(f"attention [{att['rows'][0]} x {att['rows'][1]}] fwd+bwd  blocked {att['blocked_ms']:.2f} ms, "
              f"{att['library']} {att['library_ms']:.2f} ms ({att['blocked_ms'] / att['library_ms']:.2f}x); "
              f"max relative difference out {att['max_rel_diff_out']:.1e}, grads {att['max_rel_diff_grad']:.1e}")
    mem = ours["memory_after_train"]
    print(f"memory ours: peak {_gib(mem.get('peak_bytes_in_use'))} of {_gib(mem.get('bytes_limit'))}"
          + (f"; torch train peak {_gib(theirs['train_peak_bytes'])}" if theirs and "train_peak_bytes" in theirs else ""))
    if theirs is None:
        print("torch: no result (the torch part failed or timed out; see its output above)")
    elif "skipped" in theirs:
        print(f"torch: skipped - {theirs['skipped']}")
    else:
        print(f"torch {theirs['torch']} on {theirs['device']}, GDN kernels {theirs['gdn_kernels']} "
              "(without fla/causal_conv1d transformers runs its slow reference GDN)")
    combined = {"ours": ours, "torch": theirs}
    print("ACCELERATOR_CHECK " + json.dumps(combined))
    return combined


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=("jax", "torch", "report"))
    ap.add_argument("files", nargs="*", help="report: the jax and (optional) torch JSON files")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--plan", type=Path, help="torch: the jax part's JSON (model and shapes)")
    ap.add_argument("--tiny", action="store_true", help="tiny model and shapes (automatic on CPU)")
    ap.add_argument("--model", choices=tuple(CANDIDATES), help="skip the memory-based choice")
    ap.add_argument("--param-dtype", default="bfloat16", choices=("bfloat16", "float32"),
                    help="float32 = the recipes' fp32 master weights (a smaller model fits)")
    ap.add_argument("--scan-layers", default="auto", choices=("auto", "on", "off"),
                    help="layer scan (auto: on from 8 layers) or the Python layer loop")
    ap.add_argument("--peak-tflops", type=float, help="the chip's dense bf16 peak, if not in the table")
    args = ap.parse_args(argv)
    if args.part == "report":
        files = [Path(f) for f in args.files]
        theirs = json.loads(files[1].read_text()) if len(files) > 1 and files[1].exists() else None
        report(json.loads(files[0].read_text()), theirs)
        return 0
    def save(result: dict) -> dict:
        # Replaced whole: a part killed by its time limit never leaves half a file.
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result))
        os.replace(tmp, args.out)
        return result

    if args.part == "jax":
        run_jax(args, save)
    else:
        run_torch(json.loads(args.plan.read_text()), save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
