"""Sampler: greedy == step-by-step argmax of the full forward, top-k=1 == greedy, determinism,
padding invariance, log-probs == recomputation with the model, stop tokens / stop strings, and
padded vocabulary rows (model ids past the tokenizer) never sampled; the truncated (top-k/top-p)
draw token-identical to the sorted reference with the same inverse-CDF draw, its frequencies, and
the ends of its uniform; the blocked max + argmax equals the plain one."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from hr1_jax.models import CausalLM, ModelConfig, build_model, sharding_context
from hr1_jax.models.logprobs import sequence_logprobs
from hr1_jax.models.sampler import (Sampler, _trim_at_stop_string, draw_by_weight, generate_tokens, left_pad,
                                    mask_padded_vocab, max_and_argmax, process_logits, step_uniforms, token_logprob,
                                    truncated_draw)
from hr1_jax.models.tokenizer import load_tokenizer
from tests.models.numerics import reorder_tol
from tests.models.test_fast_paths import NEG, _boundary, _logits as _fp_logits, _sorted_reference

N_NEW = 10
_truncate = jax.jit(process_logits, static_argnums=(2, 4, 5))
PROMPTS = [list(range(40, 45)), list(range(300, 309)), list(range(900, 920))]  # 5, 9, 20 tokens


@pytest.fixture(scope="module")
def setup():
    cfg = ModelConfig(vocab_size=2048, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
                      num_kv_heads=2, head_dim=16)
    model = build_model(cfg, nnx.Rngs(0))
    # Scale the random init up so logits are well separated (no near-ties flipping argmax).
    nnx.update(model, jax.tree.map(lambda x: x * 4, nnx.state(model)))
    tok = load_tokenizer()
    sampler = Sampler(model, tok, prompt_bucket=16)
    greedy = sampler.generate_ids(PROMPTS, key=jax.random.key(0), max_new_tokens=N_NEW, temperature=0)
    return model, tok, sampler, greedy


def _teacher_forced(rows, width=32 + N_NEW):
    """Right-pad prompt+generated rows to one width (causal: padding after a token cannot change
    its prediction), so one jitted forward serves every row."""
    arr = np.zeros((len(rows), width), np.int32)
    for i, r in enumerate(rows):
        arr[i, :len(r)] = r
    return jnp.asarray(arr)


def _logprob_tol(logits, cfg, temperature=1.0):
    """Two evaluations of the same log-probs (cached decode vs full forward, a prompt alone vs padded
    beside longer ones) differ only in XLA's reduction order. The longest reduction feeding a logit
    is the MLP down-projection; the logits' magnitude stands in for its sum|terms|, and a log-prob
    (logit - logsumexp) is of that magnitude."""
    return reorder_tol(np.abs(logits).max() / temperature, max(cfg.intermediate_size, cfg.hidden_size))


@nnx.jit
def _forward(model, seq):
    return model(seq)[0]


@nnx.jit(static_argnames=("temperature",))
def _seq_logprobs(model, seq, temperature):
    return sequence_logprobs(model, seq, chunk_size=8, temperature=temperature)[0]


def test_greedy_matches_full_forward_argmax_and_logprobs(setup):
    model, _, _, out = setup
    assert out["tokens"].shape == (3, N_NEW)
    rows = [p + out["tokens"][i, :int(out["lengths"][i])].tolist() for i, p in enumerate(PROMPTS)]
    all_logits = np.asarray(_forward(model, _teacher_forced(rows)))
    for i, prompt in enumerate(PROMPTS):
        n = int(out["lengths"][i])
        gen = out["tokens"][i, :n]
        logits = all_logits[i, len(prompt) - 1:len(prompt) - 1 + n]  # predictions of generated tokens
        np.testing.assert_array_equal(gen, logits.argmax(-1))
        ref_lp = jax.nn.log_softmax(logits, -1)[np.arange(n), gen]
        np.testing.assert_allclose(out["logprobs"][i, :n], ref_lp, atol=_logprob_tol(logits, model.cfg))
        np.testing.assert_array_equal(out["logprobs"][i, :n], out["sample_logprobs"][i, :n])


def test_greedy_over_key_blocks_matches_the_full_forward():
    """A 256-slot cache of 64-dim keys holds its 128-slot segment in two key blocks on CPU
    (`cache.key_block`): greedy decoding through it still picks, at every one of 240 steps, a token
    the full forward ranks first (up to reduction-order noise), with its log-prob."""
    cfg = ModelConfig(vocab_size=2048, hidden_size=128, intermediate_size=128, num_layers=1, num_heads=2,
                      num_kv_heads=1, head_dim=64)
    model = build_model(cfg, nnx.Rngs(1))
    nnx.update(model, jax.tree.map(lambda x: x * 4, nnx.state(model)))
    assert model.init_cache(1, 256, jnp.float32).layers[0].k[2].shape == (1, 1, 2, 64, 64)
    prompt, n = list(range(40, 56)), 240
    graphdef, state = nnx.split(model)
    ids = jnp.asarray([prompt], jnp.int32)
    no_stops, no_seqs = jnp.full((8,), -1, jnp.int32), jnp.full((4, 8), -1, jnp.int32)
    out = generate_tokens(graphdef, state, ids, jnp.ones_like(ids, bool), jax.random.key(0), no_stops, no_seqs,
                          max_new_tokens=n, greedy=True)
    assert int(out["lengths"][0]) == n
    gen = np.asarray(out["tokens"][0])
    logits = np.asarray(_forward(model, jnp.asarray([prompt + gen.tolist()])))[0, len(prompt) - 1:-1]
    tol = _logprob_tol(logits, cfg)
    np.testing.assert_array_less(logits.max(-1) - logits[np.arange(n), gen], tol)
    ref_lp = jax.nn.log_softmax(logits, -1)[np.arange(n), gen]
    np.testing.assert_allclose(np.asarray(out["logprobs"][0]), ref_lp, atol=tol)


def test_top_k_1_equals_greedy(setup):
    _, _, sampler, greedy = setup
    out = sampler.generate_ids(PROMPTS, key=jax.random.key(7), max_new_tokens=N_NEW, temperature=1.0, top_k=1)
    np.testing.assert_array_equal(out["tokens"], greedy["tokens"])
    np.testing.assert_allclose(out["sample_logprobs"], 0.0, atol=1e-6)  # truncated to one token


def test_padding_invariance(setup):
    model, _, sampler, greedy = setup
    alone = sampler.generate_ids([PROMPTS[0]], key=jax.random.key(0), max_new_tokens=N_NEW, temperature=0)
    assert left_pad([PROMPTS[0]], 0, 16)[0].shape[1] == 16 and left_pad(PROMPTS, 0, 16)[0].shape[1] == 32
    np.testing.assert_array_equal(alone["tokens"][0], greedy["tokens"][0])
    logits = np.asarray(_forward(model, _teacher_forced([PROMPTS[0] + greedy["tokens"][0].tolist()])))
    generated = logits[0, len(PROMPTS[0]) - 1:len(PROMPTS[0]) - 1 + N_NEW]
    np.testing.assert_allclose(alone["logprobs"][0], greedy["logprobs"][0], atol=_logprob_tol(generated, model.cfg))


def test_sampling_deterministic_and_logprobs_match_recomputation(setup):
    model, _, sampler, _ = setup
    kw = dict(max_new_tokens=N_NEW, temperature=0.7, top_p=0.9)
    a = sampler.generate_ids(PROMPTS, key=jax.random.key(3), **kw)
    b = sampler.generate_ids(PROMPTS, key=jax.random.key(3), **kw)
    c = sampler.generate_ids(PROMPTS, key=jax.random.key(4), **kw)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert not np.array_equal(a["tokens"], c["tokens"])
    rows = [p + a["tokens"][i, :int(a["lengths"][i])].tolist() for i, p in enumerate(PROMPTS)]
    seqs = _teacher_forced(rows)
    lp = np.asarray(_seq_logprobs(model, seqs, 0.7))
    all_logits = np.asarray(_forward(model, seqs))
    for i, prompt in enumerate(PROMPTS):
        n = int(a["lengths"][i])
        at = slice(len(prompt) - 1, len(prompt) - 1 + n)  # predictions of the sampled tokens
        np.testing.assert_allclose(a["logprobs"][i, :n], lp[i, at],
                                   atol=_logprob_tol(all_logits[i, at], model.cfg, temperature=0.7))
        # top-p renormalises over a subset: never less likely than under the full scaled policy
        assert np.all(a["sample_logprobs"][i, :n] >= a["logprobs"][i, :n] - 1e-5)


@dataclasses.dataclass
class _StopTok:
    """The real tokenizer with one extra stop id (the sampler reads `stop_ids`)."""
    inner: object
    extra: int

    def __getattr__(self, name):
        return getattr(self.inner, name)

    @property
    def stop_ids(self):
        return tuple(self.inner.stop_ids) + (self.extra,)


def test_stop_token_and_stop_sequence(setup):
    model, tok, sampler, greedy = setup
    assert not greedy["stopped"][2]
    row = greedy["tokens"][2].tolist()
    # stop token: the 4th greedy token of row 2 ends that row after 4 tokens; text leaves it out
    stop_tok = Sampler(model, _StopTok(tok, row[3]), prompt_bucket=16)
    res = stop_tok.generate(PROMPTS, key=jax.random.key(0), max_new_tokens=N_NEW, temperature=0)[2]
    assert res.finish_reason == "stop" and res.tokens == row[:4] and len(res.logprobs) == 4
    assert res.text == tok.decode(row[:3])
    # stop string = text of greedy tokens 5..6 of row 2 -> trimmed right after it
    stop_str = tok.decode(row[5:7])
    res = sampler.generate(PROMPTS, key=jax.random.key(0), max_new_tokens=N_NEW, temperature=0,
                           stop=[stop_str])[2]
    assert res.finish_reason == "stop"
    assert res.text.endswith(stop_str) and res.text == tok.decode(row)[:len(res.text)]
    assert res.tokens == row[:len(res.tokens)] and len(res.tokens) <= 7
    # no stop -> length
    res = sampler.generate(PROMPTS, key=jax.random.key(0), max_new_tokens=N_NEW, temperature=0)[2]
    assert res.finish_reason == "length" and res.tokens == row and res.text == tok.decode(row)


def test_text_level_stop_trimming_and_bad_params(setup):
    _, tok, sampler, _ = setup
    toks = tok.encode("answer: 42 </patch> trailing words")
    lps = [-0.5] * len(toks)
    out_toks, out_lps, _, text, cut = _trim_at_stop_string(tok, toks, lps, lps, ["</patch>"], set(tok.stop_ids))
    assert cut and text == "answer: 42 </patch>"
    assert tok.decode(out_toks).startswith(text) and len(out_lps) == len(out_toks) < len(toks)
    # a stop string inside a token's text (e.g. "42" split weirdly) still trims the text
    _, _, _, text, cut = _trim_at_stop_string(tok, toks, lps, lps, ["nswer"], set(tok.stop_ids))
    assert cut and text == "answer"
    with pytest.raises(ValueError, match="at least one token"):
        sampler.generate_ids([[]], key=jax.random.key(0))
    with pytest.raises(ValueError, match="bad sampling params"):
        sampler.generate_ids(PROMPTS, key=jax.random.key(0), top_p=0.0)


def test_qwen3_5_gdn_cache_greedy_and_padding():
    """The hybrid model's decode path (GDN conv + recurrent state, gated attention KV) through the
    sampler: greedy == teacher-forced argmax, and a prompt alone == the same prompt left-padded.
    gdn_chunk_size=32 keeps the prefill's batched triangular solves small (jaxlib 0.10.2 CPU trsm can
    deadlock its 2-thread pool on large batches)."""
    cfg = ModelConfig(family="qwen3_5_text", vocab_size=2048, hidden_size=64, intermediate_size=128, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=16, partial_rotary_factor=0.25,
                      layer_types=("linear_attention", "full_attention"), linear_num_key_heads=2,
                      linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16, gdn_chunk_size=32)
    model = build_model(cfg, nnx.Rngs(0))
    nnx.update(model, jax.tree.map(lambda x: x * 4 if x.ndim == 2 else x, nnx.state(model)))
    sampler = Sampler(model, load_tokenizer(), prompt_bucket=16)
    out = sampler.generate_ids(PROMPTS, key=jax.random.key(0), max_new_tokens=N_NEW, temperature=0)
    rows = [p + out["tokens"][i, :int(out["lengths"][i])].tolist() for i, p in enumerate(PROMPTS)]
    all_logits = np.asarray(_forward(model, _teacher_forced(rows)))
    for i, prompt in enumerate(PROMPTS):
        n = int(out["lengths"][i])
        logits = all_logits[i, len(prompt) - 1:len(prompt) - 1 + n]
        np.testing.assert_array_equal(out["tokens"][i, :n], logits.argmax(-1))
        np.testing.assert_allclose(out["logprobs"][i, :n],
                                   jax.nn.log_softmax(logits, -1)[np.arange(n), out["tokens"][i, :n]],
                                   atol=_logprob_tol(logits, cfg))
    alone = sampler.generate_ids([PROMPTS[0]], key=jax.random.key(0), max_new_tokens=N_NEW, temperature=0)
    np.testing.assert_array_equal(alone["tokens"][0], out["tokens"][0])


TOKENIZER_SIZE = 2048            # the embedded SentencePiece's ids
PADDED_VOCAB = TOKENIZER_SIZE + 128


class _FavoursPaddedIds(CausalLM):
    """A model with vocabulary padding whose logits put +100 on every padded id: unmasked, a sampler
    would draw nothing else."""

    def logits(self, h):
        padded = jnp.arange(self.cfg.vocab_size) >= TOKENIZER_SIZE
        return super().logits(h) + jnp.where(padded, 100.0, 0.0)


@dataclasses.dataclass
class _ClaimsVocab:
    """The real tokenizer claiming `vocab_size` valid ids (the sampler masks from there)."""
    inner: object
    vocab_size: int

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.fixture(scope="module")
def padded():
    cfg = ModelConfig(vocab_size=PADDED_VOCAB, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
                      num_kv_heads=2, head_dim=16)
    with sharding_context():
        model = _FavoursPaddedIds(cfg, rngs=nnx.Rngs(0))
    tok = load_tokenizer()
    assert tok.vocab_size == TOKENIZER_SIZE
    unmasked = Sampler(model, _ClaimsVocab(tok, PADDED_VOCAB), prompt_bucket=16)
    return model, Sampler(model, tok, prompt_bucket=16), unmasked


@pytest.mark.parametrize("settings", [dict(temperature=0), dict(temperature=1.0), dict(temperature=0.7, top_p=0.9)],
                         ids=["greedy", "temperature", "top_p"])
def test_padded_vocab_ids_are_never_sampled(padded, settings):
    _, sampler, unmasked = padded
    kw = dict(max_new_tokens=32, **settings)
    # Unmasked, the bias wins every step, so a path that skipped the mask could not pass below.
    assert np.all(unmasked.generate_ids(PROMPTS, key=jax.random.key(0), **kw)["tokens"] >= TOKENIZER_SIZE)
    for seed in range(4):
        out = sampler.generate_ids(PROMPTS, key=jax.random.key(seed), **kw)
        assert np.all(out["tokens"] < TOKENIZER_SIZE)
    # The demo's crash: decoding padded ids raised. They name no token, so they decode to nothing.
    assert [r.text for r in unmasked.generate(PROMPTS, key=jax.random.key(0), **kw)] == [""] * len(PROMPTS)


def test_padded_vocab_logprobs_are_over_tokenizer_ids(padded):
    """The reported log-prob is the policy over the tokenizer's ids: padded rows carry no mass."""
    model, sampler, _ = padded
    out = sampler.generate_ids(PROMPTS, key=jax.random.key(0), max_new_tokens=N_NEW, temperature=0)
    rows = [p + out["tokens"][i, :int(out["lengths"][i])].tolist() for i, p in enumerate(PROMPTS)]
    all_logits = np.asarray(_forward(model, _teacher_forced(rows)))[..., :TOKENIZER_SIZE]
    for i, prompt in enumerate(PROMPTS):
        n = int(out["lengths"][i])
        logits = all_logits[i, len(prompt) - 1:len(prompt) - 1 + n]
        ref_lp = jax.nn.log_softmax(logits, -1)[np.arange(n), out["tokens"][i, :n]]
        np.testing.assert_allclose(out["logprobs"][i, :n], ref_lp, atol=_logprob_tol(logits, model.cfg))


# --- the truncated draw: inverse CDF in vocabulary order with one uniform per row ---------------

def inverse_cdf_draw(u, logits):
    """The inverse-CDF draw from softmax(logits): `draw_by_weight` on exp(logits - max)."""
    return draw_by_weight(u, jnp.exp(logits - jnp.max(logits, axis=-1, keepdims=True)))


_draw = jax.jit(inverse_cdf_draw)


@pytest.mark.parametrize("v,valid", [(5, None), (300, None), (1024, 1000), (PADDED_VOCAB, TOKENIZER_SIZE)],
                         ids=["v5", "v300", "v1024-padded", "v2176-padded"])
@pytest.mark.parametrize("top_k,top_p", [(0, 0.95), (0, 0.5), (20, 1.0), (1, 1.0), (40, 0.9)])
@pytest.mark.parametrize("temperature", [0.7, 1.0, 1.3])
def test_truncated_tokens_identical_to_the_sorted_reference(v, valid, top_k, top_p, temperature):
    """Our truncation + draw == the sorted nucleus/top-k mask + the same draw, token for token, and
    the drawn id is always one our mask keeps. The masks may differ only on entries on the fp32
    summation boundary of top_p (either side is correct, see `_boundary`); rows where they do are
    not compared token for token."""
    top_k = min(top_k, v)
    compared = 0
    for seed in range(3):
        x = _fp_logits(seed, v)
        scaled, ours = _truncate(x, temperature, top_k, top_p, top_p < 1, valid)
        ref = _sorted_reference(scaled, top_k, top_p)
        same = np.asarray(ours) == np.asarray(ref)
        assert (same | (_boundary(scaled, top_k, top_p) if top_p < 1 else False)).all()
        rows = same.all(-1)
        compared += rows.sum()
        for step in range(6):
            u = jax.random.uniform(jax.random.fold_in(jax.random.key(seed), step), (x.shape[0],))
            tok, want = np.asarray(_draw(u, ours)), np.asarray(_draw(u, ref))
            np.testing.assert_array_equal(tok[rows], want[rows])
            kept = np.asarray(ours)[np.arange(x.shape[0]), tok] > NEG
            assert kept.all() and (valid is None or (tok < valid).all())
    assert compared >= 9  # most rows are off the boundary: the comparison is not vacuous


@pytest.mark.parametrize("v,valid", [(300, None), (PADDED_VOCAB, TOKENIZER_SIZE)], ids=["v300", "v2176-padded"])
@pytest.mark.parametrize("top_k,top_p", [(0, 0.95), (0, 0.5), (20, 1.0), (40, 0.9)])
def test_truncated_draw_is_the_mask_then_the_draw(v, valid, top_k, top_p):
    """The decode loop's `truncated_draw` (one set of exponentials for the nucleus, the draw and both
    log-probs) gives the tokens of `process_logits`' mask + `inverse_cdf_draw`, which the test above
    holds to the sorted reference, and the log-probs of `token_logprob` on them."""
    draw = jax.jit(truncated_draw, static_argnums=(2, 4))
    for seed in range(3):
        scaled = mask_padded_vocab(_fp_logits(seed, v) / 0.7, valid)
        mask = _truncate(scaled, 1.0, top_k, top_p, top_p < 1, None)[1]
        u = jax.random.uniform(jax.random.key(seed), (scaled.shape[0],))
        tok, lp, slp = draw(u, scaled, top_k, top_p, top_p < 1)
        want = _draw(u, mask)
        np.testing.assert_array_equal(np.asarray(tok), np.asarray(want))
        # the same fp32 terms, fused differently by XLA: equal to a few ulps of the log-prob
        np.testing.assert_allclose(np.asarray(lp), np.asarray(token_logprob(scaled, want)), rtol=2.0 ** -20, atol=0)
        np.testing.assert_allclose(np.asarray(slp), np.asarray(token_logprob(mask, want)), rtol=2.0 ** -20, atol=0)


def test_top_p_ties_in_probability_are_kept_together():
    """Two distinct logits whose fp32 probabilities are equal are one value to the nucleus: a top_p
    past the mass above them keeps both (by logit order the lower one would have the other's mass
    above it and be dropped), and the next smaller probability is dropped."""
    for a in np.float32([0.1, 0.05, 0.2, 0.01]):
        b = np.nextafter(a, np.float32(1))
        x = jnp.array([[3.0, b, a, -1.0, -1.0]], jnp.float32)
        p = np.asarray(jax.nn.softmax(x, axis=-1))[0]
        if p[1] == p[2]:
            break
    else:
        pytest.fail("no fp32 logit pair with equal probabilities found")
    out = process_logits(x, 1.0, 0, float(p[0] + p[1] / 2), True)[1]
    np.testing.assert_array_equal(np.asarray(out)[0] > NEG, [True, True, True, False, False])


def test_inverse_cdf_draw_frequencies_follow_the_distribution():
    """40000 seeded draws from one 300-id row (3 blocks, the last padded; some ids masked): every
    id's count is within 5 standard deviations (+1) of N p, masked ids are never drawn."""
    n, v = 40000, 300
    x = jax.random.normal(jax.random.key(11), (v,)) * 1.5
    masked = (jnp.arange(v) % 7 == 3) | (jnp.arange(v) >= 290)
    x = jnp.where(masked, NEG, x)
    tok = np.asarray(_draw(jax.random.uniform(jax.random.key(5), (n,)), jnp.broadcast_to(x, (n, v))))
    counts = np.bincount(tok, minlength=v)
    p = np.exp(np.asarray(x, np.float64) - float(x.max()))
    p /= p.sum()
    assert counts[np.asarray(masked)].sum() == 0
    assert np.all(np.abs(counts - n * p) <= 5 * np.sqrt(n * p * (1 - p)) + 1)


@pytest.mark.parametrize("u", [0.0, 1.0])
def test_inverse_cdf_draw_ends_of_the_uniform_land_on_kept_ids(u):
    """U = 0 draws the first kept id; U = 1 (past [0, 1): fp32 rounding of U * total can reach the
    total) still draws the last kept id, never a masked one or an id past the vocabulary."""
    x = jnp.full((3, 300), NEG)
    x = x.at[0, 5].set(1.0).at[0, 200].set(2.0)    # kept ids in different blocks
    x = x.at[1, 0].set(0.0)                        # a single kept id, first of all
    x = x.at[2, 127].set(3.0).at[2, 299].set(3.0)  # the last id of a block and of the (padded) vocabulary
    tok = np.asarray(inverse_cdf_draw(jnp.full((3,), u), x))
    np.testing.assert_array_equal(tok, [5, 0, 127] if u == 0 else [200, 0, 299])


def test_step_uniforms_are_the_per_step_draws():
    """The decode loop's uniforms, drawn before it, are bit for bit those of drawing step s's with
    `fold_in(key, s)` inside the loop (as before): a fixed key keeps its samples."""
    key = jax.random.key(7)
    got = np.asarray(jax.jit(step_uniforms, static_argnums=(1, 2))(key, 33, 5))
    want = np.stack([np.asarray(jax.random.uniform(jax.random.fold_in(key, s), (5,), jnp.float32)) for s in range(33)])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("v", [128, 300, 1024, 32000])
def test_max_and_argmax_equals_max_and_first_argmax(v):
    """The blocked (row max, argmax) is `jnp.max` and `jnp.argmax` (the first max) bit for bit: ties
    inside and across blocks, -0.0 beside 0.0, a row of -inf, masked ids, and sizes that are not a
    multiple of the block (the plain path)."""
    x = jax.random.normal(jax.random.key(3), (8, v))
    x = x.at[0, v - 1].set(9.0).at[0, v // 2].set(9.0)  # tie across blocks: the first one wins
    x = x.at[1, 5].set(7.0).at[1, 6].set(7.0)            # tie inside a block
    x = x.at[2].set(-0.0).at[2, v - 3].set(0.0)          # -0.0 == 0.0: the first of them
    x = x.at[3].set(-jnp.inf)
    x = x.at[4].set(jnp.where(jnp.arange(v) % 3 == 0, NEG, x[4]))
    top, idx = jax.jit(max_and_argmax)(x)
    np.testing.assert_array_equal(np.asarray(top)[:, 0], np.asarray(jnp.max(x, axis=-1)))
    np.testing.assert_array_equal(np.asarray(idx), np.asarray(jnp.argmax(x, axis=-1)))
