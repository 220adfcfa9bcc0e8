"""Analytic parameter, FLOP and byte counts for the engineer models (for MFU = achieved / peak
FLOP/s, and for decode's bandwidth floor = bytes read per step / the machine's streaming rate).

Counts multiply-adds as 2 FLOPs, matmuls only (norms, activations, RoPE and softmax are ignored,
as MaxText/PaLM-style MFU does). Training = forward + backward = 3x the forward FLOPs (no remat
recompute counted: MFU, not hardware-FLOP utilisation). Causal attention costs the average
context (seq_len + 1) / 2 per token. Gated DeltaNet is counted for the chunked (WY) algorithm
with chunk C = min(gdn_chunk_size, seq_len).
"""
from __future__ import annotations

from hr1_jax.models.cache import slots_read


def _conv_dim(cfg) -> int:
    return 2 * cfg.linear_num_key_heads * cfg.linear_key_head_dim + cfg.linear_num_value_heads * cfg.linear_value_head_dim


def layer_params(cfg, kind: str) -> int:
    """Matmul weights of one block (norm vectors excluded)."""
    e = cfg.hidden_size
    mlp = 3 * e * cfg.intermediate_size
    if kind == "full_attention":
        q_out = cfg.num_heads * cfg.head_dim * (2 if cfg.gated_attention else 1)
        return mlp + e * q_out + 2 * e * cfg.num_kv_heads * cfg.head_dim + cfg.num_heads * cfg.head_dim * e
    nv, dv = cfg.linear_num_value_heads, cfg.linear_value_head_dim
    return mlp + e * _conv_dim(cfg) + e * nv * dv + 2 * e * nv + nv * dv * e


def param_count(cfg) -> int:
    """All parameters, including embeddings, norms and the GDN conv/decay vectors."""
    e = cfg.hidden_size
    total = cfg.vocab_size * e * (1 if cfg.tie_word_embeddings else 2) + e  # embed (+ head) + final norm
    for kind in cfg.layer_types:
        total += layer_params(cfg, kind) + 2 * e
        if kind == "full_attention":
            total += 2 * cfg.head_dim  # q_norm, k_norm
        else:
            total += _conv_dim(cfg) * cfg.linear_conv_kernel_dim + 2 * cfg.linear_num_value_heads \
                + cfg.linear_value_head_dim  # conv1d, A_log + dt_bias, gated norm
    return total


def flops_per_token(cfg, seq_len: int, training: bool = True) -> float:
    """FLOPs per token of a sequence of `seq_len` tokens (forward only if not training)."""
    e = cfg.hidden_size
    fwd = 2.0 * e * cfg.vocab_size  # LM head
    ctx = (seq_len + 1) / 2.0
    for kind in cfg.layer_types:
        fwd += 2.0 * layer_params(cfg, kind)
        if kind == "full_attention":
            fwd += 4.0 * cfg.num_heads * cfg.head_dim * ctx  # q.k and p.v
        else:
            c = min(getattr(cfg, "gdn_chunk_size", 64), seq_len)
            dk, dv = cfg.linear_key_head_dim, cfg.linear_value_head_dim
            per_head = 4 * c * dk + c * (dk + dv) + 2 * c * dv + 6 * dk * dv
            fwd += float(cfg.linear_num_value_heads * per_head)
            fwd += 2.0 * _conv_dim(cfg) * cfg.linear_conv_kernel_dim
    return 3.0 * fwd if training else fwd


def decode_flops_per_token(cfg, context_len: int) -> float:
    """Forward FLOPs of one decode step at `context_len` cached tokens (GDN: recurrent update)."""
    e = cfg.hidden_size
    f = 2.0 * e * cfg.vocab_size
    for kind in cfg.layer_types:
        f += 2.0 * layer_params(cfg, kind)
        if kind == "full_attention":
            f += 4.0 * cfg.num_heads * cfg.head_dim * context_len
        else:
            f += cfg.linear_num_value_heads * 8.0 * cfg.linear_key_head_dim * cfg.linear_value_head_dim
            f += 2.0 * _conv_dim(cfg) * cfg.linear_conv_kernel_dim
    return f


def decode_bytes_per_step(cfg, batch: int, prompt_len: int, new_tokens: int, param_bytes: int = 4,
                          cache_bytes: int = 4) -> float:
    """Bytes a one-token decode step must read, averaged over `new_tokens` steps after a
    `prompt_len`-token prefill at `batch` rows: every matmul weight and the LM head once (the weights
    are shared by the rows; the embedding gather reads `batch` rows only), the KV slots the segmented
    cache attends (`cache.slots_read`: up to ~2x the written ones), and each GDN layer's recurrent
    state and conv window, read and written. Norm vectors, activations and logits are left out
    (small next to these at decode shapes), so this is a lower bound on the traffic."""
    e, max_len = cfg.hidden_size, prompt_len + new_tokens
    weights = sum(layer_params(cfg, kind) for kind in cfg.layer_types) + cfg.vocab_size * e + batch * e
    per_step = float(weights * param_bytes)
    full = sum(kind == "full_attention" for kind in cfg.layer_types)
    per_slot = 2 * batch * cfg.num_kv_heads * cfg.head_dim * cache_bytes  # keys and values
    slots = sum(slots_read(max_len, prompt_len + s + 1) for s in range(new_tokens)) / max(new_tokens, 1)
    per_step += full * per_slot * slots
    gdn = len(cfg.layer_types) - full
    if gdn:
        state = cfg.linear_num_value_heads * cfg.linear_key_head_dim * cfg.linear_value_head_dim
        conv = (cfg.linear_conv_kernel_dim - 1) * _conv_dim(cfg)
        per_step += gdn * 2 * batch * (state + conv) * 4  # fp32, read and written
    return per_step
