"""Scanned layers (`scan_layers=True`) == the layer loop on tiny Qwen3 (4 groups of one layer) and
Qwen3.5 (2 groups of [3 x GDN, full attention]): logits, a train step's loss and gradients under each
remat policy, greedy sampling through the stacked cache, HF import/export, and the layout itself."""
import functools
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import load_file, save_file

from hr1_jax.config import ConfigError
from hr1_jax.models import ModelConfig, build_model, config as models_config, load_hf_checkpoint, save_hf_checkpoint
from hr1_jax.models.config import SCAN_MIN_LAYERS
from hr1_jax.models.hf_io import CheckpointError
from hr1_jax.models.model import loop_locations, stacked_location
from hr1_jax.models.sampler import Sampler
from hr1_jax.models.tokenizer import load_tokenizer
from hr1_jax.train.ce_step import ce_loss
from tests.models.numerics import reorder_tol

GDN, FULL = "linear_attention", "full_attention"
QWEN3 = ModelConfig(vocab_size=2048, hidden_size=32, intermediate_size=64, num_layers=4, num_heads=4,
                    num_kv_heads=2, head_dim=8, tie_word_embeddings=False, scan_layers=False)
QWEN3_5 = ModelConfig(family="qwen3_5_text", vocab_size=2048, hidden_size=32, intermediate_size=64, num_layers=8,
                      num_heads=4, num_kv_heads=2, head_dim=8, partial_rotary_factor=0.25,
                      layer_types=(GDN, GDN, GDN, FULL) * 2, linear_num_key_heads=2, linear_num_value_heads=4,
                      linear_key_head_dim=8, linear_value_head_dim=8, gdn_chunk_size=8, scan_layers=False)
CONFIGS = {"qwen3": QWEN3, "qwen3_5": QWEN3_5}
B, T = 3, 20


def flat_params(model) -> dict[str, jax.Array]:
    return {".".join(map(str, p)): v.get_value() for p, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}


def scanned_copy(loop_model, cfg: ModelConfig):
    """A scanned model (layout `cfg`) holding exactly `loop_model`'s weights."""
    scan = build_model(cfg)
    stacked = {p: np.array(v) for p, v in flat_params(scan).items()}
    for path, value in flat_params(loop_model).items():
        where, group = stacked_location(cfg, path)
        if group is None:
            stacked[where] = np.asarray(value)
        else:
            stacked[where][group] = np.asarray(value)
    for path, var in nnx.to_flat_state(nnx.state(scan, nnx.Param)):
        var.set_value(jnp.asarray(stacked[".".join(map(str, path))]))
    return scan


@functools.cache
def loop_and_scan(name):
    cfg = CONFIGS[name]
    loop = build_model(cfg, nnx.Rngs(0))
    # Scale the random kernels up so logits are O(1-10) and well separated (no near-ties for argmax);
    # vectors (norms, the GDN decay A_log / dt_bias) keep their init.
    nnx.update(loop, jax.tree.map(lambda x: x * 4 if x.ndim >= 2 else x, nnx.state(loop)))
    scan_cfg = cfg.replace(scan_layers=True)
    return loop, scanned_copy(loop, scan_cfg), scan_cfg


@pytest.fixture(params=list(CONFIGS))
def pair(request):
    return loop_and_scan(request.param)


def make_batch(rows: int = B):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 2048, (rows, T)).astype(np.int32)
    mask = np.ones((rows, T), bool)
    for i in range(1, rows):  # left padding of different lengths
        mask[i, :(5 * i) % (T - 4)] = False
    return {"input_ids": jnp.asarray(ids), "attention_mask": jnp.asarray(mask), "loss_mask": jnp.asarray(mask)}


def logit_tol(logits, cfg):
    """Loop and scan run the same ops on the same shapes; only XLA's reduction order may differ. The
    longest reduction feeding a logit is the MLP down-projection; the logits' magnitude stands in
    for its sum|terms| (as in test_sampler)."""
    return reorder_tol(np.abs(logits).max(), max(cfg.intermediate_size, cfg.hidden_size))


@nnx.jit
def forward(model, ids, mask):
    return model(ids, attention_mask=mask)[0]


def test_scan_period_groups_and_auto_default():
    assert (QWEN3.scan_period, QWEN3.num_layer_groups) == (1, 4)
    assert (QWEN3_5.scan_period, QWEN3_5.num_layer_groups) == (4, 2)
    irregular = QWEN3_5.replace(layer_types=(FULL,) + (GDN,) * 7)
    assert (irregular.scan_period, irregular.num_layer_groups) == (8, 1)
    assert ModelConfig(num_layers=SCAN_MIN_LAYERS).scan_layers
    assert not ModelConfig(num_layers=SCAN_MIN_LAYERS - 1).scan_layers
    assert not ModelConfig(num_layers=32, scan_layers=False).scan_layers
    with pytest.raises(ConfigError, match="model.remat_policy"):
        ModelConfig(remat_policy="everything")


def test_section_sets_scan_and_remat_policy():
    section = models_config.defaults()
    section.num_layers = 2 * SCAN_MIN_LAYERS
    assert ModelConfig.from_section(section).scan_layers  # auto
    section.scan_layers, section.remat_policy = False, "dots"
    cfg = ModelConfig.from_section(section)
    assert not cfg.scan_layers and cfg.remat_policy == "dots"
    options = ModelConfig.runtime_options(section)
    assert options["scan_layers"] is False and options["remat_policy"] == "dots"
    section.remat_policy = "everything"
    with pytest.raises(ConfigError, match="model.remat_policy"):
        models_config.validate(section, None)


def test_params_stack_on_a_layers_axis(pair):
    loop, scan, cfg = pair
    state = dict(nnx.to_flat_state(nnx.state(scan, nnx.Param)))
    stacked = {p: v for p, v in state.items() if p[0] == "layer_groups"}
    assert "layers" not in {p[0] for p in state} and len(stacked) > 10
    for path, var in stacked.items():
        assert var.shape[0] == cfg.num_layer_groups and var.get_metadata()["out_sharding"][0] == "layers", path
    # every loop param has exactly one home, and the two maps are inverse
    homes = {lp: (".".join(map(str, p)), g) for p in state for lp, g in loop_locations(cfg, ".".join(map(str, p)))}
    assert homes.keys() == flat_params(loop).keys()
    assert all(stacked_location(cfg, lp) == home for lp, home in homes.items())


def test_logits_equal_loop(pair):
    loop, scan, cfg = pair
    batch = make_batch()
    ref = np.asarray(forward(loop, batch["input_ids"], batch["attention_mask"]))
    out = np.asarray(forward(scan, batch["input_ids"], batch["attention_mask"]))
    assert np.abs(ref).max() > 1.0
    np.testing.assert_allclose(out, ref, atol=logit_tol(ref, cfg), rtol=0)


@functools.partial(jax.jit, static_argnums=0)
def _loss_and_grads(graphdef, params, rest, batch):
    return jax.value_and_grad(lambda p: ce_loss(graphdef, p, rest, batch, chunk_size=8))(params)


def with_cfg(model, cfg: ModelConfig):
    """`model`'s weights in a model built for `cfg` (same layout, other remat settings)."""
    twin = build_model(cfg)
    nnx.update(twin, nnx.state(model))
    return twin


def loss_and_grads(model, batch) -> tuple[float, dict[str, np.ndarray]]:
    """The CE train step's loss and gradients (flat paths) for `model`'s params as they are placed."""
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    loss, grads = _loss_and_grads(graphdef, params, rest, batch)
    return float(loss), {".".join(map(str, p)): np.asarray(v.get_value()) for p, v in nnx.to_flat_state(grads)}


def chain_length(cfg: ModelConfig, tokens: int) -> int:
    """The loss is a mean over `tokens` per-token NLLs, each at the end of num_layers reductions of
    length <= max(I, E); a weight's gradient likewise sums per-token terms that reach it through up
    to num_layers such reductions. Relative errors of chained reductions add."""
    return tokens + cfg.num_layers * max(cfg.intermediate_size, cfg.hidden_size)


def assert_loss_matches(loss, ref_loss, cfg: ModelConfig, tokens: int) -> None:
    np.testing.assert_allclose(loss, ref_loss, atol=reorder_tol(ref_loss, chain_length(cfg, tokens)), rtol=0)


_LOOP_LAYER = re.compile(r"layers\.\d+\.")


def _layer_of(path: str) -> str:
    m = _LOOP_LAYER.match(path)
    return m[0] if m else path


def assert_grads_match(grads, ref, scan_cfg: ModelConfig, tokens: int) -> None:
    """Scanned gradients (stacked paths) vs loop-layout gradients, one weight at a time. All of a
    layer's gradients sum per-token terms built from the same upstream gradient, so the layer's
    largest gradient entry stands in for sum|terms| (a weight's own largest entry understates it
    where terms cancel: the GDN decay vectors A_log / dt_bias). Observed: <= 2% of the bound."""
    scale: dict[str, float] = {}
    for path, g in ref.items():
        scale[_layer_of(path)] = max(scale.get(_layer_of(path), 0.0), float(np.abs(g).max()))
    n = chain_length(scan_cfg, tokens)
    for path, g in ref.items():
        where, group = stacked_location(scan_cfg, path)
        mine = grads[where] if group is None else grads[where][group]
        assert np.abs(g).max() > 0, path
        np.testing.assert_allclose(mine, g, atol=reorder_tol(scale[_layer_of(path)], n), rtol=0, err_msg=path)


@pytest.mark.parametrize("policy", [None, "full", "dots", "dots_with_no_batch_dims"])
def test_train_step_loss_and_grads_equal_loop(pair, policy):
    """Loop without remat vs scan, without remat (None) or rematerialised under each policy."""
    loop, scan, cfg = pair
    scan_cfg = cfg.replace(remat=policy is not None, remat_policy=policy or "full")
    batch = make_batch()
    ref_loss, ref = loss_and_grads(loop, batch)
    loss, grads = loss_and_grads(with_cfg(scan, scan_cfg), batch)
    assert_loss_matches(loss, ref_loss, scan_cfg, B * T)
    assert_grads_match(grads, ref, scan_cfg, B * T)


def test_stacked_cache_and_greedy_sampling_equal_loop(pair):
    """Greedy decode through the stacked caches (KV for attention, conv + state for GDN) gives the
    loop's tokens; remat on, which sampling must also survive (the model is merged outside the
    sampler's while_loop)."""
    loop, scan, cfg = pair
    cache = scan.init_cache(2, 16, jnp.float32)
    assert len(cache.layers) == cfg.scan_period
    assert all(leaf.shape[0] == cfg.num_layer_groups for leaf in jax.tree.leaves(cache.layers))
    tok = load_tokenizer()
    prompts = [list(range(40, 45)), list(range(300, 309)), list(range(900, 920))]
    outs = []
    for model in (loop, scan):
        outs.append(Sampler(with_cfg(model, model.cfg.replace(remat=True)), tok, prompt_bucket=16).generate_ids(
            prompts, key=jax.random.key(0), max_new_tokens=8, temperature=0))
    ref, out = outs
    np.testing.assert_array_equal(out["tokens"], ref["tokens"])
    np.testing.assert_array_equal(out["lengths"], ref["lengths"])
    # a log-prob (logit - logsumexp) is of the logits' magnitude: the model's logits on random
    # tokens give the scale
    batch = make_batch()
    logits = np.asarray(forward(loop, batch["input_ids"], batch["attention_mask"]))
    np.testing.assert_allclose(out["logprobs"], ref["logprobs"], atol=logit_tol(logits, cfg), rtol=0)


def _tensors(path):
    return load_file(str(path / "model.safetensors"))


def test_hf_round_trip_with_scan(tmp_path):
    """Loop export -> scanned import -> export: the same tensors bit for bit and the same config.json;
    the imported model is the scanned copy of the loop model; a missing layer tensor is named."""
    loop, scan, cfg = loop_and_scan("qwen3_5")
    save_hf_checkpoint(loop, loop.cfg, str(tmp_path / "loop"))
    imported, imported_cfg = load_hf_checkpoint(str(tmp_path / "loop"), scan_layers=True,
                                                gdn_chunk_size=cfg.gdn_chunk_size)
    assert imported_cfg.scan_layers and imported_cfg.replace(scan_layers=False) == loop.cfg
    expected = flat_params(scan)
    got = flat_params(imported)
    assert got.keys() == expected.keys()
    for k in got:
        np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(expected[k]), err_msg=k)
    save_hf_checkpoint(imported, imported_cfg, str(tmp_path / "scan"))
    a, b = _tensors(tmp_path / "loop"), _tensors(tmp_path / "scan")
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert json.loads((tmp_path / "loop" / "config.json").read_text()) == \
        json.loads((tmp_path / "scan" / "config.json").read_text())
    del a["model.layers.5.mlp.up_proj.weight"]
    (tmp_path / "broken").mkdir()
    save_file(a, str(tmp_path / "broken" / "model.safetensors"))
    (tmp_path / "broken" / "config.json").write_text((tmp_path / "loop" / "config.json").read_text())
    with pytest.raises(CheckpointError, match=r"lacks 1 tensors.*layers\.5\.mlp\.up_proj"):
        load_hf_checkpoint(str(tmp_path / "broken"), scan_layers=True, gdn_chunk_size=cfg.gdn_chunk_size)
