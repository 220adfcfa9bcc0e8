"""Causal self-attention forward + backward of a train step: the model's attention (`_softmax_attend`'s
own VJP) against autodiff through `jax.nn.softmax` (the plain formula it replaced), same blocks, same
inputs, in one process; then bench_model.py's whole train step with the model's causal attention
(query blocks split off q) against the former form (each block's rows sliced out of the whole q), and
with RoPE's own VJP against autodiff through its rotate-half concatenation (the former form), and with
the attention's mask added as a bias and q scaled before the scores matmul against the former select
and scaled scores (the same backward).

    .venv/bin/python benchmarks/bench_attention.py [--shapes demo,20m] [--batch 8] [--seq 512]
        [--repeats 9]

Per shape (the heads of `bench_model.py`'s configs): `attention.causal_attention` on [batch, seq]
with two left-padded rows, loss = sum(out * cotangent), `jax.value_and_grad` over q, k, v, jitted.
Both ways are timed interleaved (`ab_compare.compare`: one call each per round, in
position-balanced rounds after two untimed ones), medians over `--repeats` rounds; the ratio is the
baseline's median over ours, with the median of the same-round ratios beside it. The max
|difference| of the outputs and gradients is printed as a check. The two step tables time
`ShardedTrainer` steps of the shape's `bench_model.py` config on a [batch, seq] batch, one trainer per
way (same initial weights), the first step's loss the check. Load at start and end and the steal share
of all CPU time while timing are printed. Runs under the glibc malloc tunables and
XLA:CPU dispatch the launch scripts run jobs with (`hr1_jax.utils.host_env`).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hr1_jax.utils.host_env import configure_jax, job_malloc_requested, reexec_with_job_malloc  # noqa: E402

# glibc reads its tunables at process start: re-exec under them before anything allocates.
if __name__ == "__main__":
    reexec_with_job_malloc()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

configure_jax()

from ab_compare import compare, parse_shape_args, table_row, timed_rounds, traced_with  # noqa: E402  (benchmarks/, the script's folder)
from bench_model import CONFIGS, make_batch, make_trainer  # noqa: E402
from flax import nnx  # noqa: E402

from hr1_jax.models import attention, build_model, layers  # noqa: E402

# (query heads, KV heads, head_dim) of bench_model.py's configs
SHAPES = {"tiny": (4, 2, 16), "demo": (4, 2, 32), "20m": (4, 2, 64)}


def autodiff_softmax_attend(qr, k, v, mask):
    """The baseline: the former `_attend` body, differentiated by JAX through jax.nn.softmax."""
    scores = jnp.einsum("bkrd,bksd->bkrs", qr, k, preferred_element_type=jnp.float32) * (qr.shape[-1] ** -0.5)
    probs = jax.nn.softmax(jnp.where(mask[:, None], scores, attention._MASKED), axis=-1).astype(v.dtype)
    return jnp.einsum("bkrs,bksd->bkrd", probs, v)


def _select_mask_fwd(qr, k, v, mask):
    """The former `_softmax_attend` forward: scores scaled after the matmul, the mask a select."""
    scores = jnp.einsum("bkrd,bksd->bkrs", qr, k, preferred_element_type=jnp.float32) * (qr.shape[-1] ** -0.5)
    probs = jax.nn.softmax(jnp.where(mask[:, None], scores, attention._MASKED), axis=-1)
    out = jnp.einsum("bkrs,bksd->bkrd", probs.astype(v.dtype), v)
    return out, (qr, k, v, mask, probs, out)


@jax.custom_vjp
def select_mask_softmax_attend(qr, k, v, mask):
    """The mask table's baseline: the former forward (`_select_mask_fwd`) with the model's backward."""
    return _select_mask_fwd(qr, k, v, mask)[0]


select_mask_softmax_attend.defvjp(_select_mask_fwd, attention._softmax_attend_bwd)


def step_fn(core, valid, cotangent):
    """jit(value_and_grad) of sum(causal_attention(q, k, v) * cotangent), traced with `core` as the
    attention's softmax-attend."""
    def loss(q, k, v):
        return jnp.sum(attention.causal_attention(q, k, v, valid, q.shape[1]) * cotangent)

    return traced_with(attention, "_softmax_attend", core, jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2))))


def sliced_causal_attention(q, k, v, kv_valid, chunk: int):
    """The step table's baseline: the former `attention.causal_attention`, whose query blocks were rows
    sliced out of the whole q laid out as rows (each slice's gradient a pad to the whole sequence,
    the pads summed)."""
    t, kvh = q.shape[1], k.shape[1]
    g = q.shape[2] // kvh
    qr, slots = attention._rows(q, kvh), jnp.repeat(jnp.arange(t), g)
    size = min(chunk, max(attention.CAUSAL_BLOCK, -(-t // attention.CAUSAL_MAX_BLOCKS)))
    if t <= size:
        return attention._unrows(attention._attend(qr, k, v, slots, kv_valid), t)
    block = jax.checkpoint(attention._attend) if t > chunk else attention._attend
    outs = []
    for lo in range(0, t, size):
        hi = min(t, lo + size)
        outs.append(block(qr[:, :, lo * g:hi * g], k[:, :, :hi], v[:, :, :hi], slots[lo * g:hi * g],
                          kv_valid[:, :hi]))
    return attention._unrows(jnp.concatenate(outs, axis=2), t)


def autodiff_rope(x, cos, sin):
    """The rope table's baseline: the former `layers.apply_rope`, x * cos + rotate_half(x) * sin with
    rotate_half a concatenation, differentiated by JAX (each half's cotangent padded to the whole head,
    the pads summed)."""
    rd = cos.shape[-1]
    cos, sin = cos[:, :, None, :].astype(x.dtype), sin[:, :, None, :].astype(x.dtype)
    x_rot, x_pass = x[..., :rd], x[..., rd:]
    rotated = jnp.concatenate([-x_rot[..., rd // 2:], x_rot[..., :rd // 2]], axis=-1)
    return jnp.concatenate([x_rot * cos + rotated * sin, x_pass], axis=-1)


def bench_step(name: str, batch: int, seq: int, repeats: int, attr: str, ways: dict, baseline: str) -> dict:
    """bench_model's train step at config `name`, one trainer per way (same initial weights), each traced
    with `attention.<attr>` set to its way's function (`ways`: name -> function, `baseline` and "ours")."""
    cfg = CONFIGS[name]

    def trainer_step(impl):
        trainer = make_trainer(build_model(cfg, nnx.Rngs(0)))
        return traced_with(attention, attr, impl, lambda b: trainer.step(b)["loss"])

    fns = {way: trainer_step(impl) for way, impl in ways.items()}
    return {"shape": name} | compare(fns, (make_batch(cfg.vocab_size, batch, seq),), repeats, baseline=baseline)


def bench_shape(name: str, batch: int, seq: int, repeats: int) -> dict:
    heads, kv_heads, head_dim = SHAPES[name]
    ks = jax.random.split(jax.random.key(0), 4)
    q = jax.random.normal(ks[0], (batch, seq, heads, head_dim))
    k, v = (jax.random.normal(key, (batch, kv_heads, seq, head_dim)) for key in ks[1:3])
    cotangent = jax.random.normal(ks[3], q.shape)
    pads = jnp.zeros((batch,), jnp.int32).at[: min(2, batch)].set(seq // 8)   # two left-padded rows
    valid = jnp.arange(seq)[None] >= pads[:, None]
    fns = {"autodiff": step_fn(autodiff_softmax_attend, valid, cotangent),
           "ours": step_fn(attention._softmax_attend, valid, cotangent)}
    return {"shape": name, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim} \
        | compare(fns, (q, k, v), repeats, baseline="autodiff")


def bench_torch_sdpa(name: str, batch: int, seq: int, repeats: int) -> dict:
    """Our causal attention (jitted, no padding, as bench_model.py's batch) against torch's
    `scaled_dot_product_attention(is_causal=True)` after `repeat_kv`, the path HF's Qwen3 trains
    through in bench_model.py: the forward alone (torch under no_grad), and forward + backward of
    sum(out * cotangent) over q, k, v. Interleaved, position-balanced rounds after the untimed ones;
    per pass: both medians, torch's over ours, and the max |difference| of the outputs / gradients."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    heads, kv_heads, head_dim = SHAPES[name]
    ks = jax.random.split(jax.random.key(0), 4)
    q = jax.random.normal(ks[0], (batch, seq, heads, head_dim))
    k, v = (jax.random.normal(key, (batch, kv_heads, seq, head_dim)) for key in ks[1:3])
    cotangent = jax.random.normal(ks[3], q.shape)
    valid = jnp.ones((batch, seq), bool)
    forward = jax.jit(lambda q, k, v: attention.causal_attention(q, k, v, valid, seq))
    step = jax.jit(jax.grad(lambda q, k, v: jnp.sum(forward(q, k, v) * cotangent), argnums=(0, 1, 2)))
    # torch's layout [B, heads, T, D]; repeat_kv repeats each KV head for its group of query heads
    tq, tk, tv = (torch.from_numpy(np.array(x)).requires_grad_() for x in (q.swapaxes(1, 2), k, v))
    t_cot = torch.from_numpy(np.array(cotangent.swapaxes(1, 2)))

    def torch_attention():
        g = heads // kv_heads
        return F.scaled_dot_product_attention(tq, tk.repeat_interleave(g, 1), tv.repeat_interleave(g, 1),
                                              is_causal=True)

    def torch_forward():
        with torch.no_grad():
            return torch_attention()

    def torch_step():
        return torch.autograd.grad((torch_attention() * t_cot).sum(), (tq, tk, tv))

    dq, dk, dv = step(q, k, v)
    diffs = {"forward": float(np.abs(torch_forward().numpy().swapaxes(1, 2) - np.asarray(forward(q, k, v))).max()),
             "forward + backward": max(float(np.abs(a.numpy() - np.asarray(b)).max())
                                       for a, b in zip(torch_step(), (dq.swapaxes(1, 2), dk, dv)))}

    rows = []
    for what, ours, theirs in (("forward", lambda: jax.block_until_ready(forward(q, k, v)), torch_forward),
                               ("forward + backward", lambda: jax.block_until_ready(step(q, k, v)), torch_step)):
        r = timed_rounds({"ours": ours, "torch": theirs}, repeats, baseline="torch")
        rows.append(f"| {name} ({heads} / {kv_heads} / {head_dim}) | {what} | {r['ours_ms']:.2f} | {r['torch_ms']:.2f} "
                    f"| {r['ratio']:.2f} ({r['ratio_pairwise']:.2f}) | {diffs[what]:.1e} | {r['load']} | {r['steal']} |")
    return {"rows": rows}


def main(argv=None) -> int:
    args = parse_shape_args(__doc__.splitlines()[0], SHAPES, argv)
    print(f"causal attention fwd+bwd [{args.batch} x {args.seq}], fp32, {jax.devices()[0].platform}; "
          f"medians of {args.repeats}, interleaved, position-balanced; job malloc "
          f"{'on' if job_malloc_requested() else 'off'}; baseline: autodiff through jax.nn.softmax")
    print("| shape (heads / KV heads / head_dim) | autodiff ms | ours ms | autodiff / ours (pairwise) | max abs diff | load | steal |")
    print("|---|--:|--:|--:|--:|--|--|")
    for name in args.shapes:
        r = bench_shape(name, args.batch, args.seq, args.repeats)
        print(table_row(f"{name} ({r['heads']} / {r['kv_heads']} / {r['head_dim']})", r, "autodiff"), flush=True)
    print(f"\ncausal attention [{args.batch} x {args.seq}], no padding: ours against torch's "
          "scaled_dot_product_attention (is_causal, after repeat_kv: HF's sdpa path)")
    if importlib.util.find_spec("torch") is None:
        print("torch: not installed, table skipped (bash launch/setup.sh installs it with the test extras)")
    else:
        print("| shape (heads / KV heads / head_dim) | pass | ours ms | torch ms | torch / ours (pairwise) "
              "| max abs diff | load | steal |")
        print("|---|---|--:|--:|--:|--:|--|--|")
        for name in args.shapes:
            for row in bench_torch_sdpa(name, args.batch, args.seq, args.repeats)["rows"]:
                print(row, flush=True)
    step_tables = (("query blocks sliced out of the whole q", "causal_attention",
                    {"sliced": sliced_causal_attention, "ours": attention.causal_attention}),
                   ("RoPE differentiated through the rotate-half concatenation", "apply_rope",
                    {"autodiff": autodiff_rope, "ours": layers.apply_rope}),
                   ("the attention's mask as a select, its scale after the scores matmul", "_softmax_attend",
                    {"select": select_mask_softmax_attend, "ours": attention._softmax_attend}))
    for what, attr, ways in step_tables:
        baseline = next(iter(ways))
        print(f"\ntrain step [{args.batch} x {args.seq}] (bench_model.py's config, CE + AdamW); baseline: {what}")
        print(f"| config | {baseline} ms | ours ms | {baseline} / ours (pairwise) | first loss abs diff | load | steal |")
        print("|---|--:|--:|--:|--:|--|--|")
        for name in args.shapes:
            r = bench_step(name, args.batch, args.seq, args.repeats, attr, ways, baseline)
            print(table_row(name, r, baseline), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
