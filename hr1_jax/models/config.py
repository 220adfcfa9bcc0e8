"""Config section `model`: the engineer model (family, size, dtype, checkpoint, tokenizer)."""
import ml_collections

from hr1_jax.config import require

FAMILIES = ("qwen3", "qwen3_5_text")
DTYPES = ("float32", "bfloat16")


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.family = "qwen3"
    c.hf_checkpoint = ""      # a local HF folder (config.json + safetensors); "" = random init
    c.tokenizer = ""          # "" = from hf_checkpoint, or the project-trained SentencePiece model
    c.param_dtype = "float32"
    c.dtype = "float32"       # activation dtype
    c.remat = False
    # Architecture for random init (tiny Qwen3-style engineer by default).
    c.vocab_size = 2048
    c.hidden_size = 128
    c.intermediate_size = 384
    c.num_layers = 2
    c.num_heads = 4
    c.num_kv_heads = 2
    c.head_dim = 32
    c.rope_theta = 1_000_000.0
    c.tie_word_embeddings = True
    c.logprob_chunk_size = 1024
    return c


def validate(c, config) -> None:
    require(c.family in FAMILIES, "model.family", f"must be one of {FAMILIES}")
    require(c.param_dtype in DTYPES, "model.param_dtype", f"must be one of {DTYPES}")
    require(c.dtype in DTYPES, "model.dtype", f"must be one of {DTYPES}")
    require(c.num_heads % c.num_kv_heads == 0, "model.num_kv_heads", "must divide model.num_heads")
