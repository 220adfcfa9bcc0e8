"""Analytic parameter/FLOP counts used for MFU."""
import jax
import numpy as np
import pytest
from flax import nnx

from hr1_jax.models import ModelConfig, build_model
from hr1_jax.models.flops import decode_bytes_per_step, decode_flops_per_token, flops_per_token, param_count

CFGS = {
    "qwen3_tied": ModelConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                              num_kv_heads=2, head_dim=8),
    "qwen3_5": ModelConfig(family="qwen3_5_text", vocab_size=128, hidden_size=32, intermediate_size=64, num_layers=2,
                           num_heads=4, num_kv_heads=2, head_dim=8, partial_rotary_factor=0.5,
                           layer_types=("linear_attention", "full_attention"), linear_num_key_heads=2,
                           linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
                           tie_word_embeddings=False),
}


@pytest.mark.parametrize("name", sorted(CFGS))
def test_param_count_matches_the_model(name):
    cfg = CFGS[name]
    abstract = nnx.eval_shape(lambda: build_model(cfg, nnx.Rngs(0)))
    n = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(nnx.state(abstract, nnx.Param)))
    assert param_count(cfg) == n


def test_dense_flops_by_hand():
    cfg = CFGS["qwen3_tied"]
    e, f, v, h, kv, d = 32, 64, 128, 4, 2, 8
    per_layer = 3 * e * f + e * h * d + 2 * e * kv * d + h * d * e
    seq = 9
    fwd = 2 * (2 * per_layer + e * v) + 2 * 4 * h * d * (seq + 1) / 2
    assert flops_per_token(cfg, seq, training=False) == pytest.approx(fwd)
    assert flops_per_token(cfg, seq) == pytest.approx(3 * fwd)
    # decode attends over the whole context; longer context costs more
    assert decode_flops_per_token(cfg, 100) > decode_flops_per_token(cfg, 10) > 2 * (2 * per_layer + e * v)


def test_hybrid_flops_grow_linearly_for_gdn_layers():
    cfg = CFGS["qwen3_5"]
    only_gdn = cfg.replace(num_layers=1, layer_types=("linear_attention",))
    # GDN cost per token is independent of sequence length once seq >= chunk size
    assert flops_per_token(only_gdn, 4096) == flops_per_token(only_gdn, 8192)
    assert flops_per_token(cfg, 8192) > flops_per_token(cfg, 4096)  # the attention layer


def test_decode_bytes_by_hand():
    cfg = CFGS["qwen3_tied"]
    e, f, v, h, kv, d = 32, 64, 128, 4, 2, 8
    weights = 2 * (3 * e * f + e * h * d + 2 * e * kv * d + h * d * e) + e * v + 3 * e  # + 3 embedding rows
    # prompt 60, 8 new tokens (max_len 68: segments 64, 4): steps see 61..64 slots (read 64), then 65..68 (68)
    slots = (4 * 64 + 4 * 68) / 8
    want = 4 * weights + 2 * (2 * 3 * kv * d * 4) * slots
    assert decode_bytes_per_step(cfg, 3, 60, 8) == pytest.approx(want)
    assert decode_bytes_per_step(cfg, 3, 60, 8, param_bytes=2, cache_bytes=2) == pytest.approx(want / 2)


def test_decode_bytes_count_the_gdn_state_read_and_written():
    cfg = CFGS["qwen3_5"]
    attn_only = cfg.replace(num_layers=1, layer_types=("full_attention",))
    gdn_only = cfg.replace(num_layers=1, layer_types=("linear_attention",))
    state = 4 * 8 * 8 + 3 * (2 * 2 * 8 + 4 * 8)  # Hv*Dk*Dv + (K-1)*conv_dim
    weights = 4 * (32 * (2 * 2 * 8 + 4 * 8) + 32 * 4 * 8 + 2 * 32 * 4 + 4 * 8 * 32 + 3 * 32 * 64 + 32 * 128 + 2 * 32)
    assert decode_bytes_per_step(gdn_only, 2, 16, 4) == pytest.approx(weights + 2 * 2 * state * 4)
    assert decode_bytes_per_step(attn_only, 2, 16, 4) > 4 * 32 * 128  # head + KV, no state
