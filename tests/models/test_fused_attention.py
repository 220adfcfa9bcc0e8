"""`model.attention_impl`: the fused causal attentions (cuDNN on a GPU, splash on a TPU) against the
blocked XLA path.

cuDNN cannot run on this CPU; its call is `jax.nn.dot_product_attention` with the same masks and
lengths as the `xla` implementation tested here, so these tests pin this repo's part (which rows take
the library, the lengths, the fallback, finite pad rows, the model wiring). The splash kernel runs
here in Pallas's interpreter (`SPLASH_INTERPRET`), on one device and in `shard_map` over a CPU mesh.
The kernels on their chips are checked by `benchmarks/accelerator_check.py`."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from hr1_jax.config import ConfigError, base_config, validate_config
from hr1_jax.models import ModelConfig, attention, build_model, fused_attention
from hr1_jax.models.fused_attention import library_causal_attention, resolve, splash_causal_attention
from hr1_jax.parallel import config as pconfig, rules_tuple
from hr1_jax.parallel.mesh import make_mesh
from tests.models.numerics import reorder_tol


def test_resolve_picks_each_backend_its_kernel():
    assert resolve("auto", jnp.float32, "cpu") == "blocked"
    assert resolve("auto", jnp.bfloat16, "tpu") == "blocked"
    assert resolve("auto", jnp.float32, "gpu") == "blocked"   # cuDNN's fused attention takes no fp32
    assert resolve("auto", jnp.bfloat16, "gpu") == "cudnn"
    assert resolve("auto", jnp.float16, "gpu") == "cudnn"
    assert resolve("xla", jnp.float32, "cpu") == "xla"
    assert resolve("blocked", jnp.bfloat16, "gpu") == "blocked"
    with pytest.raises(ValueError, match="needs a GPU and bf16/fp16"):
        resolve("cudnn", jnp.bfloat16, "cpu")
    with pytest.raises(ValueError, match="needs a GPU and bf16/fp16"):
        resolve("cudnn", jnp.float32, "gpu")
    with pytest.raises(ValueError, match="must be one of"):
        resolve("flash", jnp.float32, "cpu")
    assert resolve("auto", jnp.float32, "tpu") == "blocked"   # splash is opt-in until measured on a TPU
    assert resolve("splash", jnp.float32, "tpu") == "splash"
    with pytest.raises(ValueError, match="needs a TPU"):
        resolve("splash", jnp.float32, "cpu")


@pytest.fixture
def interpreted_splash(monkeypatch):
    monkeypatch.setattr(fused_attention, "SPLASH_INTERPRET", True)


def _qkv(b, t, h, kvh, d, seed=0):
    ks = jax.random.split(jax.random.key(seed), 3)
    return (jax.random.normal(ks[0], (b, t, h, d)), jax.random.normal(ks[1], (b, t, kvh, d)),
            jax.random.normal(ks[2], (b, t, kvh, d)))


def _sentinel(q):
    return lambda: jnp.full(q.shape, 7.0, q.dtype)


def test_right_padded_rows_take_the_library_and_match_one_full_softmax():
    b, t, h, kvh, d = 3, 12, 4, 2, 8
    q, k, v = _qkv(b, t, h, kvh, d)
    lengths = jnp.array([12, 5, 0])   # a full row, a right-padded row, collate's all-pad filler row
    valid = jnp.arange(t)[None] < lengths[:, None]
    out = jax.jit(lambda q, k, v, m: library_causal_attention(q, k, v, m, "xla", _sentinel(q)))(q, k, v, valid)
    ref = attention.dot_attention(q, k.swapaxes(1, 2), v.swapaxes(1, 2), jnp.arange(t), valid)
    assert bool(jnp.all(jnp.isfinite(out)))            # pad rows too: their zero loss weight stays zero
    assert not bool(jnp.any(out == 7.0))               # the library ran, not the fallback
    tol = reorder_tol(float(jnp.abs(v).max()), t)
    for row, n in enumerate(np.asarray(lengths)):
        np.testing.assert_allclose(np.asarray(out)[row, :n], np.asarray(ref)[row, :n], atol=tol)


@pytest.mark.parametrize("layout", ["left_padded", "hole"])
def test_other_masks_run_the_fallback(layout):
    b, t = 2, 10
    q, k, v = _qkv(b, t, 4, 2, 8)
    valid = np.ones((b, t), bool)
    if layout == "left_padded":
        valid[1, :3] = False
    else:
        valid[0, 4] = False
    out = library_causal_attention(q, k, v, jnp.asarray(valid), "xla", _sentinel(q))
    np.testing.assert_array_equal(np.asarray(out), 7.0)


def test_auto_falls_back_to_blocked_where_jax_refuses_cudnn(caplog):
    """`auto` asks for cuDNN with required=False: a trace-time refusal (here: no cuDNN on this CPU)
    runs the blocked path with a warning; `cudnn` chosen explicitly raises it."""
    q, k, v = (x.astype(jnp.bfloat16) for x in _qkv(1, 8, 2, 1, 16))
    valid = jnp.ones((1, 8), bool)
    with pytest.raises((RuntimeError, NotImplementedError, ValueError)):
        fused_attention.causal_attention(q, k, v, valid, "cudnn", _sentinel(q))
    with caplog.at_level("WARNING", logger=fused_attention.__name__):
        out = fused_attention.causal_attention(q, k, v, valid, "cudnn", _sentinel(q), required=False)
    np.testing.assert_array_equal(np.asarray(out, np.float32), 7.0)
    assert "using the blocked path" in caplog.text


_QWEN3 = ModelConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_layers=2, num_heads=4,
                     num_kv_heads=2, head_dim=16, attn_chunk_size=8)
_QWEN3_5 = ModelConfig(family="qwen3_5_text", vocab_size=97, hidden_size=64, intermediate_size=96, num_layers=2,
                       num_heads=4, num_kv_heads=2, head_dim=16, partial_rotary_factor=0.25,
                       layer_types=("linear_attention", "full_attention"), linear_num_key_heads=2,
                       linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
                       attn_chunk_size=8)


_LAYOUTS = {"right_padded": [[1] * 20, [1] * 13 + [0] * 7, [0] * 20],
            "left_padded": [[1] * 20, [0] * 7 + [1] * 13, [0] * 20],
            "holes": [[1] * 20, [1] * 5 + [0] * 3 + [1] * 12, [0] * 20]}


@pytest.mark.parametrize("layout", sorted(_LAYOUTS))
def test_splash_matches_one_full_softmax_for_any_padding(layout, interpreted_splash):
    """Padding as its own segment: real queries see exactly the real keys up to them, any layout; the
    length (20) is padded to the kernel's 128-slot blocks inside."""
    q, k, v = _qkv(3, 20, 4, 2, 8)
    valid = jnp.asarray(_LAYOUTS[layout], bool)
    cot = jax.random.normal(jax.random.key(5), q.shape) * valid[..., None, None]
    ref_fn = lambda q, k, v: attention.dot_attention(q, k.swapaxes(1, 2), v.swapaxes(1, 2), jnp.arange(20), valid)
    out = jax.jit(splash_causal_attention)(q, k, v, valid)
    ref = ref_fn(q, k, v)
    assert bool(jnp.all(jnp.isfinite(out)))
    real = np.asarray(valid)
    tol = reorder_tol(float(jnp.abs(v).max()), 20)
    np.testing.assert_allclose(np.asarray(out)[real], np.asarray(ref)[real], atol=tol)
    grads = [jax.jit(jax.grad(lambda q, k, v, f=f: jnp.sum(f(q, k, v) * cot), argnums=(0, 1, 2)))(q, k, v)
             for f in (ref_fn, lambda q, k, v: splash_causal_attention(q, k, v, valid))]
    for g_ref, g in zip(*grads):
        assert bool(jnp.all(jnp.isfinite(g)))
        np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), atol=reorder_tol(float(jnp.abs(g_ref).max()) * 8, 20))


def test_splash_under_a_mesh_runs_per_device_and_matches_one_device(interpreted_splash):
    """Under `jax.set_mesh` (as the train steps run) the kernel runs in shard_map, rows over the data
    and fsdp axes, KV heads over the tensor axis: the same values as on one device."""
    sec = pconfig.defaults()
    sec.data, sec.fsdp, sec.tensor = 2, 1, 2
    mesh = make_mesh(sec, devices=jax.devices()[:4])
    q, k, v = _qkv(4, 20, 4, 2, 8)
    valid = jnp.asarray(_LAYOUTS["right_padded"] + [[1] * 9 + [0] * 11], bool)
    one = jax.jit(splash_causal_attention)(q, k, v, valid)
    with jax.set_mesh(mesh):
        fn = jax.jit(splash_causal_attention)
        assert "shard_map" in str(jax.make_jaxpr(fn)(q, k, v, valid))
        meshed = fn(q, k, v, valid)
    real = np.asarray(valid)
    np.testing.assert_allclose(np.asarray(meshed)[real], np.asarray(one)[real], atol=reorder_tol(float(jnp.abs(v).max()), 20))


@pytest.mark.parametrize("impl", ["xla", "splash"])
@pytest.mark.parametrize("cfg", [_QWEN3, _QWEN3_5], ids=["qwen3", "qwen3_5"])
def test_model_loss_and_gradients_match_the_blocked_path(cfg, impl, monkeypatch, interpreted_splash):
    """A train-step-shaped loss (padded positions weighted 0) through a fused `attention_impl` against
    `blocked`: the same loss and parameter gradients, all finite, with a filler row of padding."""
    calls = []
    fused = fused_attention.causal_attention
    monkeypatch.setattr(fused_attention, "causal_attention", lambda *a, **kw: calls.append(a[4]) or fused(*a, **kw))
    t = 20
    ids = jnp.asarray(np.random.RandomState(0).randint(0, cfg.vocab_size, (3, t)), jnp.int32)
    mask = jnp.arange(t)[None] < jnp.array([[20], [13], [0]])
    weight = jnp.where(mask, 1.0, 0.0)

    def loss(model):
        logits, _ = model(ids, attention_mask=mask)
        return jnp.sum(weight * jax.nn.logsumexp(logits, axis=-1))

    runs = {}
    for name in ("blocked", impl):
        model = build_model(cfg.replace(attention_impl=name), nnx.Rngs(0))
        value, grads = nnx.value_and_grad(loss)(model)
        runs[name] = (float(value), jax.tree.leaves(nnx.state(grads)))
        # the fused model's full-attention layers called the fused path, the blocked model's did not
        assert calls == [impl] * (name == impl) * cfg.layer_types.count("full_attention")
        calls.clear()
    (ref_loss, ref_grads), (fused_loss, fused_grads) = runs["blocked"], runs[impl]
    # Sums over up to t keys per attention output and over every real position in the loss.
    assert fused_loss == pytest.approx(ref_loss, rel=reorder_tol(1.0, t * int(mask.sum())))
    for g_ref, g in zip(ref_grads, fused_grads):
        assert bool(jnp.all(jnp.isfinite(g)))
        scale = float(jnp.abs(g_ref).max()) * cfg.hidden_size
        np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), atol=reorder_tol(scale, t * int(mask.sum())))


def test_config_section_validates_and_carries_the_choice():
    c = base_config()
    c.model.attention_impl = "flash"
    with pytest.raises(ConfigError, match="model.attention_impl"):
        validate_config(c)
    c.model.attention_impl = "xla"
    assert ModelConfig.from_section(c.model).attention_impl == "xla"
    assert ModelConfig.runtime_options(c.model)["attention_impl"] == "xla"
    with pytest.raises(ConfigError, match="attention_impl"):
        ModelConfig(attention_impl="flash")


def test_splash_in_a_sharded_scanned_remat_model_matches_the_blocked_path(interpreted_splash):
    """The train steps' setting: parameters laid out by the train rules on a (data 2, tensor 2) mesh,
    scanned and rematerialised layers, the loss and its gradients under `jax.set_mesh`."""
    sec = pconfig.defaults()
    sec.data, sec.fsdp, sec.tensor = 2, 1, 2
    mesh = make_mesh(sec, devices=jax.devices()[:4])
    rules = rules_tuple(sec.train_rules)
    cfg = _QWEN3.replace(vocab_size=96, num_layers=3, layer_types=(), scan_layers=True, remat=True)
    ids = jnp.asarray(np.random.RandomState(1).randint(0, cfg.vocab_size, (4, 20)), jnp.int32)
    mask = jnp.arange(20)[None] < jnp.array([[20], [13], [0], [9]])

    def loss(model):
        logits, _ = model(ids, attention_mask=mask)
        return jnp.sum(jnp.where(mask, jax.nn.logsumexp(logits, axis=-1), 0.0))

    runs = {}
    for impl in ("blocked", "splash"):
        model = build_model(cfg.replace(attention_impl=impl), nnx.Rngs(0), mesh=mesh, rules=rules)
        graphdef, state = nnx.split(model)
        step = jax.jit(lambda state: nnx.value_and_grad(loss)(nnx.merge(graphdef, state)))
        with jax.set_mesh(mesh):
            value, grads = step(state)
        runs[impl] = (float(value), jax.tree.leaves(nnx.state(grads)))
    (ref_loss, ref_grads), (loss_splash, grads_splash) = runs["blocked"], runs["splash"]
    assert loss_splash == pytest.approx(ref_loss, rel=reorder_tol(1.0, 20 * int(mask.sum())))
    for g_ref, g in zip(ref_grads, grads_splash):
        scale = float(jnp.abs(g_ref).max()) * cfg.hidden_size
        np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), atol=reorder_tol(scale, 20 * int(mask.sum())))


def test_the_model_imports_without_the_splash_kernel():
    """The experimental splash module is imported on first use only: a JAX without it still builds and
    trains the model on every other path."""
    import subprocess
    import sys

    code = ("import sys; import hr1_jax.models.model; "
            "sys.exit(any('splash_attention' in name for name in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], timeout=300).returncode == 0
