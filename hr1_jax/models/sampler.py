"""Batched autoregressive sampling with the model's cache: one jitted prefill + `lax.while_loop` decode.

Prompts of different lengths are left-padded into one [B, P] batch (P bucketed to limit the number
of compiled shapes); the model's cache tracks padding, so a prompt gives the same output alone or
beside longer prompts. Each step draws from the temperature / top-k / top-p processed distribution
with key `fold_in(key, step)`, so a fixed key gives identical samples. Top-k and top-p find their
thresholds by search on fp32 bit patterns, exact and without a sort (a full sort of a 32K vocabulary
was ~87% of a decode step): top-k on the logits (32 counting passes), top-p on the probabilities
themselves (masked-sum passes that read only the probabilities: 30 halvings over a batch, ~15
interpolated passes over a CPU row, `nucleus_threshold`). Argmax is a blocked max + argmax.
Untruncated sampling (top_k = 0, top_p = 1) draws `jax.random.categorical`'s Gumbel tokens; a
truncated distribution is drawn by inverse CDF with one uniform per row (`draw_by_weight`: a
block-sum pass plus one 128-wide block, instead of a full-vocabulary Gumbel tensor per step), and its
exponentials are computed once per step for the nucleus, the draw and both log-probs.

Two per-token log-probs are returned, both fp32, for the sampled token:
  * `logprobs`: log softmax(logits / T) - the temperature-scaled policy *before* top-k/top-p
    truncation. This is what a trainer recomputes (`logprobs.token_logprobs(..., temperature=T)`),
    so GRPO uses it as the behaviour/old-policy log-prob.
  * `sample_logprobs`: log-prob under the truncated, renormalised distribution actually sampled
    from (equal to `logprobs` when top_k = 0 and top_p = 1).
Greedy decoding (temperature 0) reports log softmax(logits) (T = 1) for both.

Padded vocabulary: a model's vocabulary is often larger than its tokenizer's (HF checkpoints round it
up, e.g. Qwen 151936 rows vs ~151665 ids; a project model may be built wider than a freshly trained
SentencePiece). Ids >= `valid_vocab_size` name no token, so they are masked to -1e30 (fp32) before
every pick - greedy, temperature, top-k and top-p - and carry no mass in either log-prob. `Sampler`
takes the size from its tokenizer (`tokenizer.vocab_size`); `generate_tokens` masks nothing unless
given one.

Stopping: any id in `stop_ids` (eos / `<|im_end|>`), or a token-level stop sequence (each stop
string encoded by the tokenizer) matched inside the loop; because a string can also arise from a
different tokenisation, `Sampler.generate` re-checks the decoded text and trims tokens, log-probs and
text at the first stop string (the stop string is kept in the text; stop *tokens* are kept in
`tokens` but not in `text`).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

_NEG = -1e30


@dataclasses.dataclass(frozen=True)
class SampleResult:
    text: str
    tokens: list[int]
    logprobs: list[float]          # temperature-scaled policy log-probs (see module doc)
    sample_logprobs: list[float]   # under the truncated distribution actually sampled from
    finish_reason: str             # "stop" | "length"
    prompt_tokens: list[int]


def mask_padded_vocab(logits: jax.Array, valid_vocab_size: int | None) -> jax.Array:
    """fp32 logits [B, V] with ids >= valid_vocab_size (rows past the tokenizer's last id) at -1e30;
    None (or a size covering V) masks nothing."""
    logits = logits.astype(jnp.float32)
    if valid_vocab_size is None or valid_vocab_size >= logits.shape[-1]:
        return logits
    return jnp.where(jnp.arange(logits.shape[-1]) < valid_vocab_size, logits, _NEG)


def _sortable_keys(x: jax.Array) -> jax.Array:
    """uint32 keys ordered like the fp32 values x (sign bit flipped for positives, all bits for
    negatives), so thresholds can be bisected exactly on the integers; -0.0 is keyed as +0.0."""
    x = x.astype(jnp.float32)
    bits = jax.lax.bitcast_convert_type(jnp.where(x == 0, 0.0, x), jnp.uint32)
    return jnp.where(bits >> 31 == 1, ~bits, bits | jnp.uint32(0x80000000))


def _bisect_keys(keys: jax.Array, below: callable) -> jax.Array:
    """Per row, the smallest key K in [0, 2^32) with `below(K)` true ([B] uint32), for a `below`
    that is monotone (false ... false true ... true) in K; 32 halvings of the key range, each one
    masked pass over the vocabulary - no sort."""
    lo = jnp.zeros(keys.shape[:-1], jnp.uint32)          # below(lo - 1) is false (or lo = 0)
    hi = jnp.full(keys.shape[:-1], 0xFFFFFFFF, jnp.uint32)  # below(hi) is true (caller's bracket)

    def halve(_, bounds):
        lo, hi = bounds
        mid = lo + (hi - lo) // 2
        ok = below(mid[:, None])
        return jnp.where(ok, lo, mid + 1), jnp.where(ok, mid, hi)

    return jax.lax.fori_loop(0, 32, halve, (lo, hi))[1]


def top_k_mask(logits: jax.Array, k: int) -> jax.Array:
    """Keep each row's k largest logits (ties at the k-th value all kept), the rest -1e30: the k-th
    largest key is the largest K with count(key >= K) >= k, i.e. the smallest K with
    count(key > K) < k."""
    keys = _sortable_keys(logits)
    kth = _bisect_keys(keys, lambda t: jnp.sum(keys > t, axis=-1) < k)
    return jnp.where(keys < kth[:, None], _NEG, logits)


_ONE_BITS = 0x3F800000  # the bit pattern of fp32 1.0: non-negative floats order like their bits


def _float_of(bits: jax.Array) -> jax.Array:
    return jax.lax.bitcast_convert_type(bits, jnp.float32)


def _bits_of(x: jax.Array) -> jax.Array:
    """int32 bit patterns of non-negative fp32 x, ordered like the values."""
    return jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.int32)


def _bisect_nucleus(shape: tuple, top_p, mass_above) -> jax.Array:
    """The bit patterns [shape] of the smallest fp32 t with mass_above(t) < top_p, for the mass of
    probabilities above t: 30 halvings of [0, 1]'s bit patterns, each one masked sum that reads the
    probabilities alone (no keys beside them: ~20% cheaper a pass). The search of a batch of rows."""
    lo = jnp.zeros(shape, jnp.uint32)
    hi = jnp.full(shape, _ONE_BITS, jnp.uint32)  # mass(probs > 1) = 0 < top_p

    def halve(_, bounds):
        lo, hi = bounds
        mid = lo + (hi - lo) // 2
        ok = mass_above(_float_of(mid)) < top_p
        return jnp.where(ok, lo, mid + 1), jnp.where(ok, mid, hi)

    return jax.lax.fori_loop(0, _ONE_BITS.bit_length(), halve, (lo, hi))[1]


# The row search's slack (`_search_row_nucleus`): the interpolation steps it may take beyond a
# bisection's (ITP's n0), and the most times its upper end may snap onto an entry.
_ITP_SLACK = 1
_MAX_SNAPS = 2
# Its int32 state, one vector (scalars in separate loop carries cost XLA:CPU a copy and a small
# kernel each a pass, more than the pass's reduction at 32K entries): the bracket, the next
# threshold to try, the side that moved last (-1 hi, 1 lo), interpolation steps and snaps taken,
# whether a snap is due, and whether `mid` is a snap's probe.
_LO, _HI, _MID, _SIDE, _STEPS, _SNAPS, _SNAP, _PROBE = range(8)


def _search_row_nucleus(top_p, n: int, row_max, mass_above, max_below) -> tuple[jax.Array, jax.Array]:
    """`_bisect_nucleus` for one row of n probabilities, bit for bit, in about half its passes at
    32K near-uniform entries (benchmarks/bench_sampler.py): (the threshold's bit pattern, the passes
    made), int32 scalars. mass_above(t) is the row's fp32 sum of entries > t (monotone in t: the
    bisection's), max_below(t) its largest entry <= t; row_max its largest entry.

    The bracket [lo, hi] (mass_above(lo - 1) >= top_p > mass_above(hi)) starts at [0, row max] and is
    split where a line through its ends' masses crosses top_p (regula falsi; Illinois: the end kept
    twice has its residual halved), moved toward the midpoint as far as ITP's projection needs, so the
    row takes at most a bisection's passes + `_ITP_SLACK`, besides its snaps and the pass after each.
    Interpolation finds the answer's neighbourhood fast but not the gap below it (neighbouring entries
    can be ~1000 bit patterns apart): once the bracket holds under 1.5 entries' worth of mass, hi snaps
    onto max_below(hi), which has hi's mass above it, and the next pass tries the pattern just below
    that entry; with it the only entry left, the search ends there. Each pass is one reduction."""
    top_p = jnp.asarray(top_p, jnp.float32)
    hi = _bits_of(row_max)
    n_max = 32 - jax.lax.clz(hi) + _ITP_SLACK  # a bisection of [0, hi] takes bit_length(hi) passes
    # first try: below (1 - top_p) / n the entries outside the nucleus could not hold 1 - top_p (either
    # side of it holds <= hi candidates, within the projection's bound for a first step: slack >= 1)
    first = jnp.clip(_bits_of(jnp.maximum((1.0 - top_p) / n, 0.0)), 0, jnp.maximum(hi - 1, 0))
    ints = jnp.zeros(8, jnp.int32).at[_HI].set(hi).at[_MID].set(first)
    masses = jnp.array([1.0, 0.0], jnp.float32)  # the mass above lo - 1 (1 until lo moves), above hi

    def next_mid(lo, hi, lo_v, f_lo, f_hi, side, stale, steps):
        gl, gh = f_lo - top_p, f_hi - top_p  # gl >= 0 > gh
        gl = jnp.where(stale & (side < 0), gl / 2, gl)
        gh = jnp.where(stale & (side > 0), gh / 2, gh)
        falsi = _bits_of(lo_v + gl / (gl - gh) * (_float_of(hi) - lo_v))
        # ITP's projection: both sides of the split keep at most m candidates, so after step j at most
        # 2^(n_max - j - 1) are left, and one after n_max steps (the outer clip keeps any split valid)
        m = jnp.left_shift(1, jnp.clip(n_max - steps - 1, 0, 30))
        return jnp.clip(jnp.clip(falsi, hi - m, lo + m - 1), lo, hi - 1)

    def mass_pass(state):
        ints, (f_lo, f_hi), passes = state
        lo, hi, mid, side, steps, snaps, probe = (ints[k] for k in (_LO, _HI, _MID, _SIDE, _STEPS, _SNAPS, _PROBE))
        f = mass_above(_float_of(mid))
        below = f < top_p
        moved = jnp.where(below, -1, 1)
        lo, f_lo = jnp.where(below, lo, mid + 1), jnp.where(below, f_lo, f)
        hi, f_hi = jnp.where(below, mid, hi), jnp.where(below, f, f_hi)
        steps = steps + (probe == 0)
        lo_v = jnp.where(lo > 0, _float_of(lo - 1), 0.0)
        snap = (lo < hi) & (lo > 0) & (snaps < _MAX_SNAPS) & (f_lo - f_hi < 1.5 * lo_v)
        mid = next_mid(lo, hi, lo_v, f_lo, f_hi, moved, moved == side, steps)
        ints = jnp.stack([lo, hi, mid, moved, steps, snaps, snap.astype(jnp.int32), jnp.int32(0)])  # _LO.._PROBE
        return ints, jnp.stack([f_lo, f_hi]), passes + 1

    def snap_pass(state):
        ints, masses, passes = state
        hi = _bits_of(max_below(_float_of(ints[_HI])))
        ints = ints.at[_HI].set(hi).at[_MID].set(hi - 1).at[_SNAPS].add(1).at[_SNAP].set(0).at[_PROBE].set(1)
        return ints, masses, passes + 1

    ints, _, passes = jax.lax.while_loop(
        lambda state: state[0][_LO] < state[0][_HI],
        lambda state: jax.lax.cond(state[0][_SNAP] > 0, snap_pass, mass_pass, state),
        (ints, masses, jnp.int32(0)))
    return ints[_HI], passes


# On CPU, XLA splits a reduction over more entries than this across its thread pool; for a bisection
# pass that split cost 2.5-3x per entry on a 2-core box (benchmarks/bench_sampler.py), so the CPU
# search reads at most this many entries per reduction, and a row's passes run back to back while
# it is in cache.
CPU_NUCLEUS_CHUNK = 32768


def _masked_mass(x: jax.Array, t: jax.Array) -> jax.Array:
    return jnp.sum(jnp.where(x > t, x, 0.0), axis=-1)


def _max_below(x: jax.Array, t: jax.Array) -> jax.Array:
    return jnp.max(jnp.where(x <= t, x, 0.0), axis=-1)


def _bisect_rows(x: jax.Array, top_p) -> jax.Array:
    """`_bisect_nucleus` of each row of probabilities x [..., V] (bit patterns [...])."""
    return _bisect_nucleus(x.shape[:-1], top_p, lambda t: _masked_mass(x, t[..., None]))


def _row_nucleus(row: jax.Array, top_p) -> tuple[jax.Array, jax.Array]:
    """`_search_row_nucleus` of one row, whole ([V]) or in pieces ([n, size], each pass over the
    pieces in turn; zeros pad the last, never above a t >= 0): (bit pattern, passes)."""
    if row.ndim == 1:
        return _search_row_nucleus(top_p, row.shape[0], jnp.max(row), lambda t: _masked_mass(row, t),
                                   lambda t: _max_below(row, t))

    def over_pieces(reduce, combine):
        return lambda t: jax.lax.fori_loop(1, row.shape[0], lambda j, acc: combine(acc, reduce(row[j], t)),
                                           reduce(row[0], t))
    return _search_row_nucleus(top_p, row.size, jnp.max(row), over_pieces(_masked_mass, jnp.add),
                               over_pieces(_max_below, jnp.maximum))


def nucleus_threshold(probs: jax.Array, top_p, chunk: int | None = None) -> jax.Array:
    """Per row [B, 1], the smallest fp32 t with mass(probs > t) < top_p, for probabilities [B, V]
    (each in [0, 1]): the nucleus is probs >= t. One bisection (`_bisect_nucleus`) over the whole
    batch, or, past `chunk` entries (default: `CPU_NUCLEUS_CHUNK` on CPU, no limit elsewhere), one
    per group of whole rows of at most `chunk` entries. On CPU a row of more than half a chunk is
    searched alone by `_search_row_nucleus` (the bisection's threshold in about half the passes),
    whole or, past `chunk`, in pieces of at most `chunk` that each pass sums in turn."""
    b, v = probs.shape
    on_cpu = jax.default_backend() == "cpu"
    chunk = chunk or (CPU_NUCLEUS_CHUNK if on_cpu else b * v)
    if on_cpu and 2 * v > chunk:
        n = -(-v // chunk)
        size = -(-v // n)
        rows = jnp.pad(probs, ((0, 0), (0, n * size - v))).reshape(b, n, size) if n > 1 else probs
        bits = jax.lax.map(lambda row: _row_nucleus(row, top_p)[0], rows)
    elif b * v <= chunk:
        bits = _bisect_rows(probs, top_p)
    else:  # groups of whole rows, zero rows padding the last (their thresholds are dropped)
        rows = chunk // v
        groups = -(-b // rows)
        grouped = jnp.pad(probs, ((0, groups * rows - b), (0, 0))).reshape(groups, rows, v)
        bits = jax.lax.map(lambda g: _bisect_rows(g, top_p), grouped).reshape(-1)[:b]
    return _float_of(bits)[:, None]


def fast_argmax(x: jax.Array, x_max: jax.Array | None = None) -> jax.Array:
    """`jnp.argmax(x, -1)` (the first index of the max; x without NaNs) as a max then a min over the
    matching indices: two plain reductions, which XLA:CPU runs several times faster than the
    variadic (value, index) reduce argmax lowers to. `x_max`: the row max [.., 1], if known."""
    hit = x == (jnp.max(x, axis=-1, keepdims=True) if x_max is None else x_max)
    return jnp.min(jnp.where(hit, jnp.arange(x.shape[-1], dtype=jnp.int32), x.shape[-1]), axis=-1)


def token_logprob(x: jax.Array, tok: jax.Array, x_max: jax.Array | None = None) -> jax.Array:
    """`log_softmax(x)[tok]` per row of fp32 x [B, V] (the same shifted terms, so the same value)
    without materialising the [B, V] log-softmax: two reductions and one gather."""
    m = jnp.max(x, axis=-1, keepdims=True) if x_max is None else x_max
    lse = jnp.log(jnp.sum(jnp.exp(x - m), axis=-1))
    return (jnp.take_along_axis(x, tok[:, None], axis=-1)[:, 0] - m[:, 0]) - lse


_ARGMAX_BLOCK = 128  # vocabulary ids per block of `max_and_argmax`


def max_and_argmax(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(row max [B, 1], `jnp.argmax(x, -1)` [B]) of fp32 x [B, V] without NaNs: the max of each block
    of 128 ids, the first block holding the row max, then the first id of it inside that block. One
    pass over the vocabulary instead of a max pass plus a compare-and-min pass over all of it (which
    also made XLA materialise the broadcast max for the log-prob's exp-sum)."""
    b, v = x.shape
    if v % _ARGMAX_BLOCK or v == _ARGMAX_BLOCK:
        top = jnp.max(x, axis=-1, keepdims=True)
        return top, fast_argmax(x, top)
    blocks = x.reshape(b, v // _ARGMAX_BLOCK, _ARGMAX_BLOCK)
    # the barrier keeps XLA from folding max(block max) back into a second pass over all of x
    block_max = jax.lax.optimization_barrier(jnp.max(blocks, axis=-1))
    top = jnp.max(block_max, axis=-1, keepdims=True)
    first = fast_argmax(block_max, top)
    inner = jnp.take_along_axis(blocks, first[:, None, None], axis=1)[:, 0]
    return top, first * _ARGMAX_BLOCK + fast_argmax(inner, top)


def categorical(key: jax.Array, logits: jax.Array) -> jax.Array:
    """`jax.random.categorical(key, logits, axis=-1)` (the same Gumbel draw, so the same tokens
    for a key) with `max_and_argmax`."""
    return max_and_argmax(logits + jax.random.gumbel(key, logits.shape, logits.dtype))[1]


_CDF_BLOCK = 128  # vocabulary ids per block of the inverse-CDF search


def _first_or_last(hit: jax.Array, positive: jax.Array) -> jax.Array:
    """Per row, the first index where `hit & positive`, else the last where `positive` (some entry
    of every row is positive): fp32 rounding of u or of a cumsum can leave no hit, and the fallback
    still lands on an entry with mass."""
    idx = jnp.arange(hit.shape[-1], dtype=jnp.int32)
    first = jnp.min(jnp.where(hit & positive, idx, hit.shape[-1]), axis=-1)
    last = jnp.max(jnp.where(positive, idx, -1), axis=-1)
    return jnp.where(first < hit.shape[-1], first, last)


def step_uniforms(key: jax.Array, steps: int, rows: int) -> jax.Array:
    """[steps, rows] fp32 uniforms in [0, 1): row r of step s is `uniform(fold_in(key, s), (rows,))[r]`,
    all drawn before the decode loop (one batched threefry instead of a handful of small kernels
    inside every step; the same bits as drawing them step by step)."""
    draw = lambda s: jax.random.uniform(jax.random.fold_in(key, s), (rows,), jnp.float32)
    return jax.vmap(draw)(jnp.arange(steps))


def draw_by_weight(u: jax.Array, w: jax.Array) -> jax.Array:
    """One id per row of non-negative fp32 weights [B, V] (some positive in every row), with
    probability w / sum(w), from one uniform per row u [B] in [0, 1): u * total weight, then the first
    id, in vocabulary order, whose cumulative weight exceeds it. The search is two-level - the block
    whose running block-sum exceeds u, then the id inside that block - so the vocabulary is read once
    (for the block sums) instead of once per noise draw and argmax."""
    b, v = w.shape
    nb = -(-v // _CDF_BLOCK)
    w = jnp.pad(w, ((0, 0), (0, nb * _CDF_BLOCK - v))).reshape(b, nb, _CDF_BLOCK)
    block_sum = jnp.sum(w, axis=-1)
    running = jnp.cumsum(block_sum, axis=-1)                                  # [B, nb]
    u = u * running[:, -1]
    blk = _first_or_last(running > u[:, None], block_sum > 0)
    inner = jnp.take_along_axis(w, blk[:, None, None], axis=1)[:, 0]          # [B, block]
    before = jnp.take_along_axis(running, jnp.maximum(blk - 1, 0)[:, None], axis=1)[:, 0]
    cdf = jnp.where(blk > 0, before, 0.0)[:, None] + jnp.cumsum(inner, axis=-1)
    return blk * _CDF_BLOCK + _first_or_last(cdf > u[:, None], inner > 0)


def truncate(scaled: jax.Array, top_k: int, top_p, use_top_p: bool):
    """Top-k then top-p truncation of fp32 scaled logits [B, V] (temperature applied, padded
    vocabulary at -1e30), without a sort. Top-p keeps a token iff the probability mass of the tokens
    with a strictly larger probability is < top_p (the sorted-prefix rule: the smallest prefix of the
    descending order whose mass reaches top_p, ties in probability at the last kept value all kept, the
    top token always). Returns (truncated logits, dropped ids at -1e30; row max [B, 1]; weights
    exp(truncated - max), dropped ids at 0; their sum before top-p [B, 1]): the exponentials are
    computed once for the nucleus, the draw and both log-softmax sums."""
    out = top_k_mask(scaled, top_k) if top_k > 0 else scaled
    top = jnp.max(scaled, axis=-1, keepdims=True)  # truncation keeps the top token: out's max too
    w = jnp.exp(out - top)
    total = jnp.sum(w, axis=-1, keepdims=True)
    if use_top_p:
        probs = w / total  # softmax(out)
        dropped = probs < nucleus_threshold(probs, top_p)
        out, w = jnp.where(dropped, _NEG, out), jnp.where(dropped, 0.0, w)
    return out, top, w, total


def truncated_draw(u: jax.Array, scaled: jax.Array, top_k: int, top_p, use_top_p: bool):
    """(token [B], logprob, sample_logprob) drawn by `draw_by_weight` from `truncate(scaled, ...)`
    with one uniform per row: the draw from `process_logits`' output and its `token_logprob`s, from one
    set of exponentials."""
    _, top, w, total = truncate(scaled, top_k, top_p, use_top_p)
    tok = draw_by_weight(u, w)
    shifted = jnp.take_along_axis(scaled, tok[:, None], axis=-1)[:, 0] - top[:, 0]
    lp = shifted - jnp.log(total[:, 0]) if top_k == 0 else token_logprob(scaled, tok, top)
    return tok, lp, shifted - jnp.log(jnp.sum(w, axis=-1))


def process_logits(logits: jax.Array, temperature, top_k: int, top_p, use_top_p: bool,
                   valid_vocab_size: int | None = None):
    """fp32 logits [B, V] -> (scaled logits, truncated logits); masked entries are -1e30."""
    scaled = mask_padded_vocab(logits.astype(jnp.float32) / temperature, valid_vocab_size)
    return scaled, truncate(scaled, top_k, top_p, use_top_p)[0]


def _stop_seq_hit(window: jax.Array, stop_seqs: jax.Array) -> jax.Array:
    """window [B, L] = last L generated tokens (-2 before the start); stop_seqs [S, L] right-aligned,
    -1 = unused slot. True where any sequence matches the end of the window."""
    if stop_seqs.shape[0] == 0:
        return jnp.zeros(window.shape[:1], bool)
    used = stop_seqs >= 0
    match = jnp.all(~used[None] | (window[:, None, :] == stop_seqs[None]), axis=-1)  # [B, S]
    return jnp.any(match & jnp.any(used, axis=-1)[None], axis=-1)


@functools.partial(jax.jit, static_argnames=("graphdef", "max_new_tokens", "top_k", "greedy", "use_top_p",
                                             "cache_dtype", "valid_vocab_size"))
def generate_tokens(graphdef, state, prompt_ids, prompt_mask, key, stop_ids, stop_seqs, *, max_new_tokens: int,
                    temperature=1.0, top_k: int = 0, top_p=1.0, greedy: bool = False, use_top_p: bool = False,
                    pad_id: int | jax.Array = 0, cache_dtype=jnp.float32, valid_vocab_size: int | None = None):
    """Core jitted loop. prompt_ids/prompt_mask [B, P] left-padded (last column real for every row);
    stop_ids int [K]; stop_seqs int [S, L] (see `_stop_seq_hit`); ids >= valid_vocab_size are never
    drawn (None: every model id is a token). Returns a dict of arrays:
    tokens [B, N] (pad after the end), logprobs, sample_logprobs [B, N] fp32, lengths [B] (tokens
    produced, including a final stop token), stopped [B] bool."""
    model = nnx.merge(graphdef, state)
    b, p = prompt_ids.shape
    n = max_new_tokens
    temperature = jnp.asarray(temperature, jnp.float32)
    cache = model.init_cache(b, p + n, cache_dtype)
    h, cache = model.hidden_states(prompt_ids, cache=cache, attention_mask=prompt_mask)
    logits = model.logits(h[:, -1])
    l_win = max(1, stop_seqs.shape[1])

    truncated = not greedy and (top_k > 0 or use_top_p)
    uniforms = step_uniforms(key, n, b) if truncated else None

    def pick(logits, step):
        if greedy:
            logits = mask_padded_vocab(logits, valid_vocab_size)
            top, tok = max_and_argmax(logits)
            lp = token_logprob(logits, tok, top)
            return tok, lp, lp
        scaled = mask_padded_vocab(logits.astype(jnp.float32) / temperature, valid_vocab_size)
        if truncated:
            return truncated_draw(uniforms[step], scaled, top_k, top_p, use_top_p)
        # untruncated: Gumbel noise over the whole vocabulary, as `jax.random.categorical`
        tok = categorical(jax.random.fold_in(key, step), scaled)
        lp = token_logprob(scaled, tok)
        return tok, lp, lp

    def cond(carry):
        step, done = carry[0], carry[4]
        return (step < n) & ~jnp.all(done)

    # The carry holds the last l_win tokens rather than a window sliced out of the whole token buffer.
    def body(carry):
        step, tokens, lps, slps, done, lengths, window, logits, cache = carry
        tok, lp, slp = pick(logits, step)
        tok = jnp.where(done, pad_id, tok).astype(jnp.int32)
        tokens = tokens.at[:, step].set(tok)
        lps = lps.at[:, step].set(jnp.where(done, 0.0, lp))
        slps = slps.at[:, step].set(jnp.where(done, 0.0, slp))
        lengths = jnp.where(done, lengths, step + 1)
        window = jnp.concatenate([window[:, 1:], tok[:, None]], axis=1)
        hit = jnp.any(tok[:, None] == stop_ids[None, :], axis=-1) | _stop_seq_hit(window, stop_seqs)
        done = done | hit
        new_logits, cache = model(tok[:, None], cache=cache)
        return step + 1, tokens, lps, slps, done, lengths, window, new_logits[:, -1], cache

    zeros = jnp.zeros((b, n), jnp.float32)
    carry = (jnp.int32(0), jnp.full((b, n), pad_id, jnp.int32), zeros, zeros, jnp.zeros((b,), bool),
             jnp.zeros((b,), jnp.int32), jnp.full((b, l_win), -2, jnp.int32), logits, cache)
    _, tokens, lps, slps, done, lengths, _, _, _ = jax.lax.while_loop(cond, body, carry)
    return dict(tokens=tokens, logprobs=lps, sample_logprobs=slps, lengths=lengths, stopped=done)


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int, bucket: int = 64, min_len: int = 0):
    """Left-pad token lists to a common length rounded up to a multiple of `bucket`."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    longest = max(max(len(p) for p in prompts), min_len)
    width = -(-longest // bucket) * bucket
    ids = np.full((len(prompts), width), pad_id, np.int32)
    mask = np.zeros((len(prompts), width), bool)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = p
        mask[i, width - len(p):] = True
    return ids, mask


class Sampler:
    """`Sampler(model, tokenizer).generate(prompts, ...) -> list[SampleResult]`.

    Holds the model as (graphdef, state); `update_params(state)` swaps in new weights (e.g. the
    trainer's params after `parallel.reshard_for_sampling`) without recompiling. Only the tokenizer's
    ids are ever sampled: model ids >= `tokenizer.vocab_size` (vocabulary padding) are masked.
    """

    def __init__(self, model: nnx.Module, tokenizer, *, prompt_bucket: int = 64, cache_dtype=None):
        self.graphdef, self.state = nnx.split(model)
        self.tokenizer = tokenizer
        self.prompt_bucket = prompt_bucket
        self.cache_dtype = cache_dtype or getattr(getattr(model, "cfg", None), "dtype", "float32")

    def update_params(self, params) -> None:
        """Replace the sampler's parameters (an `nnx.State` of `nnx.Param`s, e.g. from the trainer)."""
        model = nnx.merge(self.graphdef, self.state)
        nnx.update(model, params)
        self.graphdef, self.state = nnx.split(model)

    def _stop_arrays(self, stop: Sequence[str]):
        """Stop ids [K] and right-aligned token stop sequences [S, L], padded with -1 (never
        matches) to multiples of 8 / 4 / 8 so changing the stop list rarely recompiles."""
        up = lambda x, m: max(m, -(-x // m) * m)
        tok = self.tokenizer
        stop_ids = sorted(set(tok.stop_ids))
        ids = np.full((up(len(stop_ids), 8),), -1, np.int32)
        ids[:len(stop_ids)] = stop_ids
        seqs = [tok.encode(s) for s in stop if s]
        arr = np.full((up(len(seqs), 4), up(max([len(s) for s in seqs], default=0), 8)), -1, np.int32)
        for i, s in enumerate(seqs):
            arr[i, arr.shape[1] - len(s):] = s
        return ids, arr

    def generate_ids(self, prompts: Sequence[Sequence[int]], *, key: jax.Array, max_new_tokens: int = 256,
                     temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                     stop: Sequence[str] = ()) -> dict[str, np.ndarray]:
        """Token-level generation; returns host numpy arrays (see `generate_tokens`)."""
        if temperature < 0 or not 0 < top_p <= 1 or top_k < 0 or max_new_tokens < 1:
            raise ValueError(f"bad sampling params: temperature={temperature} top_k={top_k} top_p={top_p} "
                             f"max_new_tokens={max_new_tokens}")
        ids, mask = left_pad(prompts, self.tokenizer.pad_id, self.prompt_bucket)
        stop_ids, stop_seqs = self._stop_arrays(stop)
        out = generate_tokens(
            self.graphdef, self.state, jnp.asarray(ids), jnp.asarray(mask), key, jnp.asarray(stop_ids),
            jnp.asarray(stop_seqs), max_new_tokens=max_new_tokens, temperature=max(temperature, 1e-6),
            top_k=top_k, top_p=top_p, greedy=temperature == 0, use_top_p=top_p < 1.0,
            pad_id=self.tokenizer.pad_id, cache_dtype=jnp.dtype(self.cache_dtype),
            valid_vocab_size=self.tokenizer.vocab_size)
        return {k: np.asarray(jax.device_get(v)) for k, v in out.items()}

    def generate(self, prompts: Sequence[str] | Sequence[Sequence[int]], *, key: jax.Array,
                 max_new_tokens: int = 256, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                 stop: Sequence[str] = ()) -> list[SampleResult]:
        tok = self.tokenizer
        prompt_ids = [tok.encode(p) if isinstance(p, str) else [int(t) for t in p] for p in prompts]
        out = self.generate_ids(prompt_ids, key=key, max_new_tokens=max_new_tokens, temperature=temperature,
                                top_k=top_k, top_p=top_p, stop=stop)
        stop_ids = set(tok.stop_ids)
        results = []
        for i, prompt in enumerate(prompt_ids):
            n = int(out["lengths"][i])
            toks = [int(t) for t in out["tokens"][i, :n]]
            lps = [float(x) for x in out["logprobs"][i, :n]]
            slps = [float(x) for x in out["sample_logprobs"][i, :n]]
            reason = "stop" if bool(out["stopped"][i]) else "length"
            toks, lps, slps, text, cut = _trim_at_stop_string(tok, toks, lps, slps, stop, stop_ids)
            results.append(SampleResult(text=text, tokens=toks, logprobs=lps, sample_logprobs=slps,
                                        finish_reason="stop" if cut else reason, prompt_tokens=prompt))
        return results


def _trim_at_stop_string(tok, toks, lps, slps, stop, stop_ids):
    """Cut after the first token whose decoded prefix contains a stop string; text ends at the
    stop string's end. Stop tokens are left out of the text."""
    body = toks[:-1] if toks and toks[-1] in stop_ids else toks
    text = tok.decode(body)
    hits = [(text.find(s), s) for s in stop if s and s in text]
    if not hits:
        return toks, lps, slps, text, False
    pos, s = min(hits)
    end = pos + len(s)
    # Shortest token prefix whose text contains the stop string (containment grows with k).
    lo, hi = 1, len(body)
    while lo < hi:
        mid = (lo + hi) // 2
        if s in tok.decode(body[:mid]):
            hi = mid
        else:
            lo = mid + 1
    return toks[:lo], lps[:lo], slps[:lo], text[:end], True
