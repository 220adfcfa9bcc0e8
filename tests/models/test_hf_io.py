"""HF checkpoint import/export: round trips, transformers loading our export, bf16, the Qwen3.5 VLM
layout (prefix, skipped tensors, sharded files), placement on a mesh, config parsing and bad input."""
import json
import os

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import load_file, save_file

from hr1_jax.config import ConfigError
from hr1_jax.models import ModelConfig, config as models_config, build_model, load_hf_checkpoint, save_hf_checkpoint
from hr1_jax.models.hf_io import CheckpointError, hf_key_to_path
from tests.models import hf_fixtures as hf

torch = pytest.importorskip("torch")
hf.quiet_torch()

B, T = 2, 12
forward = hf.jitted_forward()
IDS = np.random.default_rng(0).integers(0, hf.VOCAB, (B, T)).astype(np.int32)
ONES = jnp.ones((B, T), jnp.int32)


def _params(model):
    return {".".join(map(str, p)): np.asarray(v.get_value()) for p, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}


def _hf_tensors(path):
    files = [f for f in os.listdir(path) if f.endswith(".safetensors")]
    out = {}
    for f in files:
        out.update(load_file(os.path.join(path, f)))
    return out


@pytest.mark.parametrize("kind", ["qwen3_tied", "qwen3_5"])
def test_load_save_load_is_bit_exact(kind, tmp_path):
    _, src = hf.cached_checkpoint(kind)
    model, cfg = load_hf_checkpoint(src)
    save_hf_checkpoint(model, cfg, str(tmp_path), copy_tokenizer_from=src)
    assert (tmp_path / "generation_config.json").exists()  # written by transformers, carried along
    again, cfg2 = load_hf_checkpoint(str(tmp_path))
    assert cfg2 == cfg
    a, b = _params(model), _params(again)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    # The export holds exactly the tensors transformers saved (same names, layouts and bits).
    orig, ours = _hf_tensors(src), _hf_tensors(str(tmp_path))
    assert orig.keys() == ours.keys()
    for k in orig:
        np.testing.assert_array_equal(orig[k], ours[k], err_msg=k)


@pytest.mark.parametrize("family", ["qwen3", "qwen3_5_text"])
def test_our_export_loads_in_transformers_with_equal_logits(family, tmp_path):
    from transformers import AutoModelForCausalLM

    torch_model, _ = hf.cached_checkpoint("qwen3_5" if family == "qwen3_5_text" else "qwen3_tied")
    cfg = ModelConfig.from_hf_dict(torch_model.config.to_dict())
    model = build_model(cfg, nnx.Rngs(1))  # our own random init, never seen by transformers
    save_hf_checkpoint(model, cfg, str(tmp_path))
    loaded = AutoModelForCausalLM.from_pretrained(str(tmp_path)).eval()
    assert type(loaded).__name__ == ("Qwen3_5ForCausalLM" if family == "qwen3_5_text" else "Qwen3ForCausalLM")
    ours, _ = forward(model, jnp.asarray(IDS), ONES)
    np.testing.assert_allclose(np.asarray(ours), hf.hf_logits(loaded, IDS), atol=1e-4, rtol=0)


def test_bf16_checkpoint_and_bf16_load(tmp_path):
    torch_model, src = hf.cached_checkpoint("qwen3_5")
    # fp32 checkpoint loaded as bf16 params (A_log / dt_bias stay fp32 for the decay)
    model, cfg = load_hf_checkpoint(src, dtype="bfloat16")
    params = _params(model)
    assert params["layers.0.linear_attn.in_proj_qkv.kernel"].dtype == ml_dtypes.bfloat16
    assert params["layers.0.linear_attn.A_log"].dtype == np.float32
    ours, _ = forward(model, jnp.asarray(IDS), ONES)
    assert ours.dtype == jnp.float32  # logits are accumulated in fp32 whatever the activation dtype
    # bf16 error vs the fp32 reference is no worse than transformers' own bf16 model's.
    ref = hf.hf_logits(torch_model, IDS)
    torch_bf16 = hf.make_hf_model("qwen3_5").to(torch.bfloat16)
    hf_err = np.abs(hf.hf_logits(torch_bf16, IDS) - ref).max()
    our_err = np.abs(np.asarray(ours) - ref).max()
    assert 0 < our_err <= 1.2 * hf_err, (our_err, hf_err)
    # A genuine bf16 safetensors checkpoint: values arrive bit-identical.
    torch_bf16.save_pretrained(str(tmp_path))
    bf, _ = load_hf_checkpoint(str(tmp_path), dtype="bfloat16")
    raw = load_file(str(tmp_path / "model.safetensors"))
    assert raw["model.layers.1.mlp.up_proj.weight"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(_params(bf)["layers.1.mlp.up_proj.kernel"],
                                  raw["model.layers.1.mlp.up_proj.weight"].T)


def _vlm_layout(src, dst, n_shards=2):
    """Rewrite a text checkpoint as a Qwen3.5 VLM release: prefixed keys, vision and MTP tensors,
    wrapped config, sharded files + index."""
    tensors = {("model.language_model." + k[len("model."):] if k.startswith("model.") else k): v
               for k, v in _hf_tensors(src).items()}
    tensors["model.visual.blocks.0.attn.qkv.weight"] = np.ones((3, 3), np.float32)
    tensors["mtp.layers.0.mlp.up_proj.weight"] = np.ones((3, 3), np.float32)
    keys = sorted(tensors)
    weight_map = {}
    for i in range(n_shards):
        name = f"model-{i + 1:05d}-of-{n_shards:05d}.safetensors"
        part = {k: tensors[k] for k in keys[i::n_shards]}
        save_file(part, os.path.join(dst, name), metadata={"format": "pt"})
        weight_map.update({k: name for k in part})
    with open(os.path.join(dst, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    with open(os.path.join(src, "config.json")) as f:
        text = json.load(f)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump({"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
                   "text_config": text, "vision_config": {}, "tie_word_embeddings": False}, f)


def test_vlm_layout_sharded_files(tmp_path):
    _, src = hf.cached_checkpoint("qwen3_5")
    _vlm_layout(src, str(tmp_path))
    model, cfg = load_hf_checkpoint(str(tmp_path))
    ref_model, ref_cfg = load_hf_checkpoint(src)
    assert cfg == ref_cfg
    a, b = _params(model), _params(ref_model)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    # sharded export with an index round-trips too
    out = tmp_path / "export"
    save_hf_checkpoint(model, cfg, str(out), max_shard_bytes=100_000)
    assert (out / "model.safetensors.index.json").exists() and len(list(out.glob("*.safetensors"))) > 1
    again, _ = load_hf_checkpoint(str(out))
    for k, v in _params(again).items():
        np.testing.assert_array_equal(v, a[k], err_msg=k)


def test_key_mapping_table():
    assert hf_key_to_path("model.language_model.layers.3.self_attn.q_proj.weight")[0] == \
        "layers.3.self_attn.q_proj.kernel"
    assert hf_key_to_path("model.layers.0.linear_attn.A_log")[0] == "layers.0.linear_attn.A_log"
    conv_path, to_ours = hf_key_to_path("model.layers.2.linear_attn.conv1d.weight")
    assert conv_path == "layers.2.linear_attn.conv1d" and to_ours(np.zeros((5, 1, 4))).shape == (4, 5)
    assert hf_key_to_path("model.visual.merger.mlp.0.weight") is None
    assert hf_key_to_path("mtp.fc.weight") is None
    assert hf_key_to_path("model.layers.0.self_attn.rotary_emb.inv_freq") is None
    with pytest.raises(CheckpointError, match="unrecognised"):
        hf_key_to_path("model.layers.0.self_attn.rotary.inv_freq")


def test_bad_checkpoints_fail_clearly(tmp_path):
    _, src = hf.cached_checkpoint("qwen3_tied")
    with pytest.raises(CheckpointError, match="config.json"):
        load_hf_checkpoint(str(tmp_path))
    tensors = _hf_tensors(src)
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="no model.safetensors"):
        load_hf_checkpoint(str(tmp_path))
    missing = {k: v for k, v in tensors.items() if "layers.1.mlp.down_proj" not in k}
    save_file(missing, str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointError, match="lacks 1 tensors"):
        load_hf_checkpoint(str(tmp_path))
    wrong = dict(tensors, **{"model.norm.weight": np.ones(3, np.float32)})
    save_file(wrong, str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointError, match="shape"):
        load_hf_checkpoint(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps(dict(config, model_type="llama")))
    with pytest.raises(ConfigError, match="model_type"):
        load_hf_checkpoint(str(tmp_path))


RULES = (("vocab", "tensor"), ("embed", "fsdp"), ("mlp", "tensor"), ("heads", "tensor"), ("kv_heads", "tensor"),
         ("conv", "tensor"), ("linear_v", "tensor"), ("linear_heads", None), ("conv_kernel", None))


def test_load_onto_mesh_places_each_tensor(tmp_path):
    _, src = hf.cached_checkpoint("qwen3_5")
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:8]).reshape(2, 2, 2), ("data", "fsdp", "tensor"))
    model, _ = load_hf_checkpoint(src, mesh=mesh, rules=RULES)
    state = dict(nnx.to_flat_state(nnx.state(model, nnx.Param)))
    kernel = state[("layers", 0, "linear_attn", "in_proj_qkv", "kernel")].get_value()
    assert kernel.sharding == jax.sharding.NamedSharding(mesh, jax.P("fsdp", "tensor"))
    assert kernel.addressable_shards[0].data.shape == (32, 64)
    emb = state[("embed_tokens", "embedding")].get_value()
    assert emb.sharding.spec == jax.P("tensor", "fsdp")
    ref_model, _ = load_hf_checkpoint(src)
    sharded, _ = forward(model, jnp.asarray(IDS), ONES)
    plain, _ = forward(ref_model, jnp.asarray(IDS), ONES)
    # sharded matmuls reduce in a different order: equal up to fp32 rounding
    np.testing.assert_allclose(np.asarray(sharded), np.asarray(plain), atol=1e-4, rtol=0)
    # exporting the sharded model gathers every tensor back: same files as the source
    save_hf_checkpoint(model, ref_model.cfg, str(tmp_path))
    orig, ours = _hf_tensors(src), _hf_tensors(str(tmp_path))
    assert orig.keys() == ours.keys()
    for k in orig:
        np.testing.assert_array_equal(orig[k], ours[k], err_msg=k)


def test_build_model_under_mesh_is_sharded():
    cfg = ModelConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2,
                      num_kv_heads=2, head_dim=16)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:8]).reshape(2, 2, 2), ("data", "fsdp", "tensor"))
    model = build_model(cfg, nnx.Rngs(0), mesh=mesh, rules=RULES)
    assert model.layers[0].mlp.gate_proj.kernel.get_value().sharding.spec == jax.P("fsdp", "tensor")
    plain = build_model(cfg, nnx.Rngs(0))  # same seed without a mesh: same values, one device
    np.testing.assert_array_equal(np.asarray(plain.layers[0].mlp.gate_proj.kernel.get_value()),
                                  np.asarray(model.layers[0].mlp.gate_proj.kernel.get_value()))


def test_config_dicts():
    # older hub configs carry a top-level rope_theta; the VLM wrapper nests the text config
    old = {"model_type": "qwen3", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
           "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4,
           "rope_theta": 1e6, "tie_word_embeddings": True, "eos_token_id": [1, 2]}
    cfg = ModelConfig.from_hf_dict(old)
    assert cfg.rope_theta == 1e6 and cfg.partial_rotary_factor == 1.0 and cfg.eos_token_id == (1, 2)
    assert ModelConfig.from_hf_dict(cfg.to_hf_dict()) == cfg
    text = dict(old, model_type="qwen3_5_text", linear_num_key_heads=1, linear_num_value_heads=2,
                linear_key_head_dim=4, linear_value_head_dim=4, num_hidden_layers=4, head_dim=8)
    del text["rope_theta"]
    text["rope_parameters"] = {"rope_type": "default", "rope_theta": 1e7, "mrope_section": [11, 11, 10],
                               "mrope_interleaved": True, "partial_rotary_factor": 0.25}
    c5 = ModelConfig.from_hf_dict({"model_type": "qwen3_5", "text_config": text})
    assert c5.family == "qwen3_5_text" and c5.rotary_dim == 2 and c5.rope_theta == 1e7
    assert c5.layer_types == ("linear_attention",) * 3 + ("full_attention",)
    assert ModelConfig.from_hf_dict(c5.to_hf_dict()) == c5
    # the experiment config section (random init)
    section = models_config.defaults()
    section.family = "qwen3_5_text"
    section.num_layers = 8
    c = ModelConfig.from_section(section)
    assert c.layer_types[3] == c.layer_types[7] == "full_attention" and c.layer_types.count("full_attention") == 2
    assert c.partial_rotary_factor == 0.25 and c.zero_centred_norms and c.gated_attention
    section.family = "qwen3"
    c = ModelConfig.from_section(section)
    assert set(c.layer_types) == {"full_attention"} and c.rotary_dim == c.head_dim and not c.gated_attention
    section.remat, section.dtype = True, "bfloat16"
    _, src = hf.cached_checkpoint("qwen3_tied")
    _, loaded = load_hf_checkpoint(src, dtype="float32", **ModelConfig.runtime_options(section))
    assert loaded.remat and loaded.dtype == "bfloat16" and loaded.param_dtype == "float32"
    with pytest.raises(ConfigError, match="rope_type"):
        ModelConfig.from_hf_dict(dict(old, rope_parameters={"rope_type": "yarn", "rope_theta": 1.0}))
