"""GRPO/SFT steps: the sharded step on an 8-device mesh equals the single-device step; SFT learns;
with a model wider than its tokenizer, the trainer scores tokens under the sampler's policy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from hr1_jax.config import base_config
from hr1_jax.models import CausalLM, ModelConfig, build_model, sharding_context
from hr1_jax.models.sampler import Sampler
from hr1_jax.models.tokenizer import load_tokenizer
from hr1_jax.parallel import make_mesh
from hr1_jax.parallel.config import rules_tuple
from hr1_jax.train.grpo_step import grpo_optimizer, make_grpo_step
from hr1_jax.train.losses import LossConfig
from hr1_jax.train.sft_step import make_sft_step, sft_optimizer
from hr1_jax.train.state import init_state, split_model, state_sharding
from hr1_jax.train.step import jit_step, logprobs_fn
from tests.models.numerics import reorder_tol

CFG = ModelConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                  num_kv_heads=2, head_dim=8)


def _grpo_batch(rng, A=2, M=8, L=12):
    ids = rng.integers(3, CFG.vocab_size, (A, M, L)).astype(np.int32)
    attn = np.ones((A, M, L), np.int32)
    lengths = rng.integers(6, L + 1, (A, M))
    for a in range(A):
        for m in range(M):
            attn[a, m, lengths[a, m]:] = 0
            ids[a, m, lengths[a, m]:] = 0
    mask = np.zeros((A, M, L - 1), np.float32)
    for a in range(A):
        for m in range(M):
            mask[a, m, 3:lengths[a, m] - 1] = 1.0
    return {"input_ids": ids, "attention_mask": attn, "loss_mask": mask,
            "advantages": rng.normal(size=(A, M)).astype(np.float32)}


def _setup(mesh, section):
    model = build_model(CFG, nnx.Rngs(0))
    graphdef, params, rest = split_model(model)
    rules = rules_tuple(section.train_rules)
    return graphdef, params, rest, rules


def _run_grpo(mesh, section, batch):
    graphdef, params, rest, rules = _setup(mesh, section)
    g = base_config().train.grpo
    tx = grpo_optimizer(g)
    sh = state_sharding(tx, params, mesh, rules)
    state = init_state(tx, params, sh)
    lp = logprobs_fn(graphdef, rest, temperature=0.7)
    flat = lambda x: x.reshape(-1, x.shape[-1])
    old = np.asarray(lp(state.params, flat(batch["input_ids"]), flat(batch["attention_mask"])))
    old = old.reshape(batch["loss_mask"].shape)
    full = dict(batch, old_logp=old, sampler_logp=old + 0.05)
    step = jit_step(make_grpo_step(graphdef, rest, tx, LossConfig(), temperature=0.7), sh, mesh)
    with jax.set_mesh(mesh):
        for _ in range(2):
            state, metrics = step(state, full)
    return state, metrics


def test_grpo_step_sharded_equals_single_device():
    assert jax.device_count() == 8
    section = base_config().mesh
    batch = _grpo_batch(np.random.default_rng(0))
    mesh8 = make_mesh(section)                       # fsdp=8
    section1 = base_config().mesh
    mesh1 = make_mesh(section1, devices=jax.devices()[:1])
    s8, m8 = _run_grpo(mesh8, section, batch)
    s1, m1 = _run_grpo(mesh1, section1, batch)
    assert float(m1["grad_norm"]) > 0
    np.testing.assert_allclose(float(m8["loss"]), float(m1["loss"]), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(float(m8["grad_norm"]), float(m1["grad_norm"]), rtol=1e-4)
    for a, b in zip(jax.tree.leaves(s8.params), jax.tree.leaves(s1.params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
    # the sharded params really are sharded
    emb = s8.params["embed_tokens"]["embedding"]
    assert len(emb.get_value().sharding.device_set) == 8


def test_grad_accumulation_is_exact():
    """A=2 micro-batches of 4 == A=1 micro-batch of 8 (numerator/denominator accumulation)."""
    section = base_config().mesh
    mesh1 = make_mesh(section, devices=jax.devices()[:1])
    b = _grpo_batch(np.random.default_rng(1), A=2, M=4)
    merged = {k: v.reshape((1, 8) + v.shape[2:]) for k, v in b.items()}
    s_a, m_a = _run_grpo(mesh1, section, b)
    s_b, m_b = _run_grpo(mesh1, section, merged)
    np.testing.assert_allclose(float(m_a["loss"]), float(m_b["loss"]), rtol=1e-5)
    for x, y in zip(jax.tree.leaves(s_a.params), jax.tree.leaves(s_b.params)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=1e-6)


def test_sft_step_learns_only_masked_continuation():
    section = base_config().mesh
    mesh = make_mesh(section, devices=jax.devices()[:1])
    graphdef, params, rest, rules = _setup(mesh, section)
    s = base_config().train.sft
    s.lr = 1e-2
    tx = sft_optimizer(s, total_steps=30)
    sh = state_sharding(tx, params, mesh, rules)
    state = init_state(tx, params, sh)
    step = jit_step(make_sft_step(graphdef, rest, tx), sh, mesh)
    ids = np.tile(np.arange(3, 19, dtype=np.int32), (1, 4, 1))
    mask = np.zeros((1, 4, 15), np.float32)
    mask[..., 8:] = 1.0
    batch = {"input_ids": ids, "attention_mask": np.ones_like(ids), "loss_mask": mask}
    losses = []
    with jax.set_mesh(mesh):
        for _ in range(30):
            state, m = step(state, batch)
            losses.append(float(m["loss"]))
    assert losses[-1] < 0.2 * losses[0]
    # loss counts masked tokens only
    assert float(m["tokens"]) == 4 * 7


TOKENIZER_SIZE = 2048            # the embedded SentencePiece's ids
PAD_BIAS, TEMP = 100.0, 0.7


class _BiasedPaddedIds(CausalLM):
    """Logits + PAD_BIAS on every padded id (>= TOKENIZER_SIZE), seen by the sampler and the trainer
    alike: a constant-1 hidden channel whose head row is the bias."""

    def hidden_states(self, *args, **kwargs):
        h, cache = super().hidden_states(*args, **kwargs)
        return jnp.concatenate([h, jnp.ones_like(h[..., :1])], axis=-1), cache

    def lm_head_weight(self):
        w = super().lm_head_weight()
        bias = jnp.where(jnp.arange(w.shape[1]) >= TOKENIZER_SIZE, PAD_BIAS, 0.0).astype(w.dtype)
        return jnp.concatenate([w, bias[None]], axis=0)


@nnx.jit
def _logits(model, ids):
    return model(ids)[0]


def _sampled_batch(model, tok):
    """Sampled rows as [M, L] GRPO batch arrays with the sampler's log-probs, plus a
    tolerance for re-scoring them: the sampler's cached decode and the trainer's full forward differ
    only in reduction order, the longest being the MLP down-projection; the valid logits' magnitude
    stands in for its sum|terms| (as in tests/models/test_sampler.py)."""
    prompts = [list(range(40, 45)), list(range(300, 309)), list(range(900, 920))]
    out = Sampler(model, tok, prompt_bucket=16).generate_ids(prompts, key=jax.random.key(0), max_new_tokens=12,
                                                              temperature=TEMP)
    length = max(len(p) for p in prompts) + 12
    ids = np.zeros((len(prompts), length), np.int32)
    attn, mask = np.zeros_like(ids), np.zeros((len(prompts), length - 1), np.float32)
    slp = np.zeros_like(mask)
    for i, p in enumerate(prompts):
        n = int(out["lengths"][i])
        ids[i, :len(p) + n] = p + out["tokens"][i, :n].tolist()
        attn[i, :len(p) + n] = 1
        mask[i, len(p) - 1:len(p) - 1 + n] = 1.0
        slp[i, len(p) - 1:len(p) - 1 + n] = out["logprobs"][i, :n]
    logits = np.asarray(_logits(model, jnp.asarray(ids)))[:, :-1, :TOKENIZER_SIZE][mask > 0]
    cfg = model.cfg
    tol = reorder_tol(np.abs(logits).max() / TEMP, max(cfg.intermediate_size, cfg.hidden_size))
    batch = {"input_ids": ids, "attention_mask": attn, "loss_mask": mask, "sampler_logp": slp,
             "advantages": np.ones((len(prompts),), np.float32)}
    return batch, tol


def test_grpo_trainer_logprobs_match_the_sampler_with_a_padded_vocab():
    cfg = ModelConfig(vocab_size=TOKENIZER_SIZE + 128, hidden_size=32, intermediate_size=64, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=8)
    with sharding_context():
        model = _BiasedPaddedIds(cfg, rngs=nnx.Rngs(0))
    tok = load_tokenizer()
    assert tok.vocab_size == TOKENIZER_SIZE
    batch, tol = _sampled_batch(model, tok)
    on = batch["loss_mask"] > 0
    graphdef, params, rest = split_model(model)
    ids, attn = batch["input_ids"], batch["attention_mask"]
    old = np.asarray(logprobs_fn(graphdef, rest, temperature=TEMP, valid_vocab_size=TOKENIZER_SIZE)(params, ids, attn))
    np.testing.assert_allclose(old[on], batch["sampler_logp"][on], atol=tol, rtol=0)
    # Over the full head the bias's mass would swamp every sampled token: the check above can fail.
    unmasked = np.asarray(logprobs_fn(graphdef, rest, temperature=TEMP)(params, ids, attn))
    assert np.all(np.abs(unmasked[on] - batch["sampler_logp"][on]) > tol)

    # The update scores with the same policy: log-ratio ~ 0 against the anchor, TIS ratio ~ 1.
    section = base_config().mesh
    mesh = make_mesh(section, devices=jax.devices()[:1])
    tx = grpo_optimizer(base_config().train.grpo)
    sh = state_sharding(tx, params, mesh, rules_tuple(section.train_rules))
    state = init_state(tx, params, sh)
    step = jit_step(make_grpo_step(graphdef, rest, tx, LossConfig(), temperature=TEMP,
                                   valid_vocab_size=TOKENIZER_SIZE), sh, mesh)
    full = {k: v[None] for k, v in dict(batch, old_logp=old).items()}
    with jax.set_mesh(mesh):
        _, m = jax.device_get(step(state, full))
    n = float(m["sums"]["tokens"])
    assert n == on.sum() and abs(float(m["sums"]["ppo_kl"])) <= n * tol
    ratio_tol = np.expm1(tol) + np.finfo(np.float32).eps
    for k in ("is_ratio_max", "is_ratio_min"):
        assert abs(float(m["extrema"][k]) - 1.0) <= ratio_tol, (k, m["extrema"][k])


def test_sft_loss_is_over_the_tokenizer_ids():
    """The first step's loss (pre-update params) is the NLL under a softmax over ids < valid only."""
    valid = CFG.vocab_size - 16
    section = base_config().mesh
    mesh = make_mesh(section, devices=jax.devices()[:1])
    graphdef, params, rest, rules = _setup(mesh, section)
    tx = sft_optimizer(base_config().train.sft, total_steps=1)
    sh = state_sharding(tx, params, mesh, rules)
    state = init_state(tx, params, sh)
    ids = np.random.default_rng(2).integers(3, valid, (1, 4, 12)).astype(np.int32)
    mask = np.ones((1, 4, 11), np.float32)
    batch = {"input_ids": ids, "attention_mask": np.ones_like(ids), "loss_mask": mask}
    step = jit_step(make_sft_step(graphdef, rest, tx, valid_vocab_size=valid), sh, mesh)
    with jax.set_mesh(mesh):
        _, m = step(state, batch)
    nll = {v: -float(np.mean(logprobs_fn(graphdef, rest, valid_vocab_size=v)(params, ids[0], np.ones_like(ids[0]))))
           for v in (valid, None)}
    model = nnx.merge(graphdef, params, rest)
    logits = np.asarray(_logits(model, jnp.asarray(ids[0])))[..., :valid]
    # Per-token errors as in _sampled_batch, plus the reordering of the mean over every token.
    tol = reorder_tol(np.abs(logits).max(), max(CFG.intermediate_size, CFG.hidden_size)) \
        + reorder_tol(max(nll.values()), mask.size)
    assert abs(float(m["loss"]) - nll[valid]) <= tol
    assert abs(nll[None] - nll[valid]) > tol      # the padded ids' mass matters: the check can fail



def test_all_padding_minibatch_changes_neither_params_nor_optimizer_state():
    section = base_config().mesh
    mesh = make_mesh(section, devices=jax.devices()[:1])
    graphdef, params, rest, rules = _setup(mesh, section)
    tx = grpo_optimizer(base_config().train.grpo)
    sh = state_sharding(tx, params, mesh, rules)
    state = init_state(tx, params, sh)
    batch = _grpo_batch(np.random.default_rng(2))
    zeros = np.zeros(batch["loss_mask"].shape, np.float32)
    real = dict(batch, old_logp=zeros, sampler_logp=zeros)
    padding = dict(real, loss_mask=zeros, advantages=np.zeros_like(batch["advantages"]))
    step = jit_step(make_grpo_step(graphdef, rest, tx, LossConfig(), temperature=0.7), sh, mesh)
    with jax.set_mesh(mesh):
        after_real, _ = step(state, real)   # Adam now has momentum
        snapshot = [np.asarray(x) for x in jax.tree.leaves((after_real.params, after_real.opt_state))]
        after_pad, metrics = step(after_real, padding)
    assert float(metrics["grad_norm"]) == 0.0
    for a, b in zip(snapshot, jax.tree.leaves((after_pad.params, after_pad.opt_state))):
        np.testing.assert_array_equal(a, np.asarray(b))
