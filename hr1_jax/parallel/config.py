"""Config section `mesh`: device mesh shape and logical-axis rules.

Model parameters and activations carry *logical* axis names ("embed", "mlp", "heads", ...); a rules
table maps each name to mesh axes ("data", "fsdp", "tensor"), comma separated, "" = replicated.
Two profiles: `train_rules` (FSDP over the embedding dim + tensor parallel heads/MLP/vocab) and
`sample_rules` (weights tensor-parallel only, so decode does no per-step all-gather of FSDP shards;
the batch still spreads over data+fsdp). Override one entry from the CLI with e.g.
`--config.mesh.train_rules.embed=`.
"""
import ml_collections

from hr1_jax.config import require

MESH_AXES = ("data", "fsdp", "tensor")

# Logical names used by the models (params) and by activations/batches.
_TRAIN_RULES = {
    # activations / batches
    "batch": "data,fsdp",
    "length": "",
    # parameters (hr1_jax.models.layers.LOGICAL_AXES)
    "vocab": "tensor",
    "embed": "fsdp",
    "mlp": "tensor",
    "heads": "tensor",
    "kv_heads": "tensor",
    "conv": "tensor",          # Gated DeltaNet qkv channels (depthwise conv => channel-parallel)
    "linear_v": "tensor",
    "linear_heads": "tensor",
    "conv_kernel": "",
    "layers": "",              # the layer-group axis of scanned (stacked) layers: never sharded
}
_SAMPLE_RULES = dict(_TRAIN_RULES, embed="")


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    # -1 = fill with the remaining devices; size-1 axes are allowed.
    c.data = 1
    c.fsdp = -1
    c.tensor = 1
    c.train_rules = ml_collections.ConfigDict(dict(_TRAIN_RULES))
    c.sample_rules = ml_collections.ConfigDict(dict(_SAMPLE_RULES))
    return c


def validate(c, config) -> None:
    sizes = [c.data, c.fsdp, c.tensor]
    require(all(s == -1 or s >= 1 for s in sizes), "mesh", "axis sizes must be >= 1 or -1")
    require(sum(s == -1 for s in sizes) <= 1, "mesh", "at most one axis may be -1")
    for profile in ("train_rules", "sample_rules"):
        for name, axes in c[profile].items():
            parts = [a.strip() for a in str(axes).split(",") if a.strip()]
            bad = [a for a in parts if a not in MESH_AXES]
            require(not bad, f"mesh.{profile}.{name}", f"unknown mesh axes {bad}; use {MESH_AXES}")
            require(len(set(parts)) == len(parts), f"mesh.{profile}.{name}", "repeats a mesh axis")


def rules_tuple(rules) -> tuple[tuple[str, tuple[str, ...] | None], ...]:
    """ConfigDict/dict {logical: "a,b"} -> flax-style ((logical, ("a","b")|None), ...)."""
    out = []
    for name, axes in dict(rules).items():
        if isinstance(axes, (tuple, list)):
            parts = tuple(axes)
        else:
            parts = tuple(a.strip() for a in str(axes or "").split(",") if a.strip())
        out.append((name, parts or None))
    return tuple(out)
