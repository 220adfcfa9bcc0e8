"""The engineer as the training stages see it: mesh, tokenizer, model, train state, sampler.

`Engineer(config, tx)` builds (or loads) the model on the mesh in the training layout, creates the
optimiser state in the matching sharding, and keeps a sampler whose weights are moved from the
trainer each step (`sync_sampler`: device-to-device reshard to the sampling layout, no host copy).
Model sources, in order: `train.init_checkpoint` (an orbax params folder written by a previous
stage, that stage's workdir, or an HF folder), `model.hf_checkpoint`, else random init from
`config.model`. A checkpoint carries its tokenizer (`export` saves it beside the params and into the
HF export) and a stage that restores one uses it unless `model.tokenizer` names another; a
tokenizer with more ids than the model has embedding rows is a config error at start-up.
"""
from __future__ import annotations

import json
import os
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

from hr1_jax.config import ConfigError
from hr1_jax.models import ModelConfig, abstract_model, build_model, load_hf_checkpoint, save_hf_checkpoint
from hr1_jax.models.sampler import Sampler
from hr1_jax.models.tokenizer import Tokenizer, carried_tokenizer, load_tokenizer
from hr1_jax.parallel import (make_mesh, maybe_initialize_distributed, reshard_for_sampling, rules_tuple,
                              state_shardings)
from hr1_jax.train.data import render_prompt
from hr1_jax.train.state import TrainState, init_state, split_model, state_sharding
from hr1_jax.utils.logging import log_event

PARAMS_DIR = "final_params"    # <stage workdir>/final_params: the handoff between stages
MODEL_CONFIG = "model_config.json"
# The prompt style a checkpoint was trained with (rows' `prompt_version`), saved beside its params
# so an evaluation asks the engineer in that style (hr1_jax/eval/prompt_styles.py).
PROMPT_STYLE_FILE = "prompt_style.json"
DEFAULT_PROMPT_STYLE = "hr1-prompt-v1"


def carried_prompt_style(folder: str) -> str:
    """The style saved in a params folder; "" when it carries none (older or HF checkpoints)."""
    path = os.path.join(folder, PROMPT_STYLE_FILE)
    if not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8") as f:
        return str(json.load(f).get("prompt_version") or "")


def rows_prompt_style(rows: list[dict]) -> str:
    """The one `prompt_version` of training rows (rows without one are the reference style)."""
    styles = {str((r.get("metadata") or {}).get("prompt_version") or DEFAULT_PROMPT_STYLE) for r in rows}
    if len(styles) > 1:
        raise ConfigError("train", f"training rows mix prompt styles {sorted(styles)}: one engineer is trained "
                                   "(and evaluated) in one style")
    return styles.pop() if styles else DEFAULT_PROMPT_STYLE


def model_config_for(config, tokenizer) -> ModelConfig:
    cfg = ModelConfig.from_section(config.model)
    if cfg.vocab_size < tokenizer.vocab_size:
        log_event("engine", "vocab_resize", model=cfg.vocab_size, tokenizer=tokenizer.vocab_size)
        cfg = cfg.replace(vocab_size=tokenizer.vocab_size)
    return cfg


def _params_source(config) -> str:
    init = config.train.init_checkpoint
    # A stage's workdir stands for its handoff folder (`--config.train.init_checkpoint=runs/sft`).
    if init and os.path.isdir(os.path.join(init, PARAMS_DIR)):
        return os.path.join(init, PARAMS_DIR)
    return init or config.model.hf_checkpoint


def _saved_model_config(source: str) -> dict:
    """The HF-style config a checkpoint folder was saved with (`config.json` or `model_config.json`)."""
    for name in ("config.json", MODEL_CONFIG):
        path = os.path.join(source, name)
        if os.path.isfile(path):
            with open(path) as f:
                return json.load(f)
    raise FileNotFoundError(f"train.init_checkpoint {source!r}: neither an HF folder (config.json) nor a "
                            f"stage output ({PARAMS_DIR}/ with params/ and {MODEL_CONFIG})")


def stage_tokenizer(config, source: str) -> Tokenizer:
    """`model.tokenizer` if set; else the restored checkpoint's own tokenizer; for a random init the
    embedded SentencePiece model."""
    spec = config.model.tokenizer
    if not spec and source:
        spec = carried_tokenizer(source)
        if not spec:
            raise ConfigError("model.tokenizer", f"the checkpoint {source} carries no tokenizer (no HF tokenizer "
                                                 "files, no SentencePiece model): name the one it was trained with")
    return load_tokenizer(spec)


def check_vocab(tokenizer: Tokenizer, model_vocab: int, source: str) -> None:
    """Fewer tokenizer ids than model rows is fine (padded rows are masked); more would index past
    the embedding."""
    if tokenizer.vocab_size > model_vocab:
        raise ConfigError("model.tokenizer", f"tokenizer {tokenizer.source} has {tokenizer.vocab_size} ids but the "
                                             f"model {source} has {model_vocab} embedding rows")


PARAMS_LAYOUT_KEY = "hr1_params_layout"


def save_params(state, cfg: ModelConfig, folder: str, tokenizer: Tokenizer) -> None:
    """The full model state (orbax, any sharding), the model config JSON and the tokenizer: what
    the next stage starts from."""
    folder = os.path.abspath(folder)
    ckptr = ocp.StandardCheckpointer()
    ckptr.save(os.path.join(folder, "params"), state, force=True)
    ckptr.wait_until_finished()
    with open(os.path.join(folder, MODEL_CONFIG), "w") as f:
        # The params' layout (stacked scan groups or one entry per layer) is fixed at save time.
        json.dump({**cfg.to_hf_dict(), PARAMS_LAYOUT_KEY: {"scan_layers": bool(cfg.scan_layers)}}, f, indent=1)
    if jax.process_index() == 0:
        tokenizer.save(folder)


class Engineer:
    def __init__(self, config, *, stage: str):
        maybe_initialize_distributed()
        self.config = config
        self.stage = stage
        self.mesh = make_mesh(config.mesh)
        self.train_rules = rules_tuple(config.mesh.train_rules)
        self.sample_rules = rules_tuple(config.mesh.sample_rules)
        source = _params_source(config)
        saved = _saved_model_config(source) if source else None   # a wrong path fails here, first
        self.tokenizer = stage_tokenizer(config, source)
        self._log_tokenizer()
        if saved is not None:  # before a large model is read
            check_vocab(self.tokenizer, ModelConfig.from_hf_dict(saved).vocab_size, source)
        t0 = time.monotonic()
        model, self.cfg = self._load_model(source, saved)
        # A restored checkpoint passes its style on; a stage that trains on rows sets theirs
        # (`use_rows_prompt_style`); "" = unknown, nothing is recorded.
        self.prompt_style = carried_prompt_style(source) if source else ""
        self.graphdef, params, self.rest = split_model(model)
        self.init_params = params
        log_event(stage, "model_ready", source=source or "random", params=int(sum(np.size(x) for x in jax.tree.leaves(params))),
                  seconds=round(time.monotonic() - t0, 2), mesh=dict(self.mesh.shape))
        self.sampler: Sampler | None = None

    def _log_tokenizer(self) -> None:
        """Which tokenizer this stage runs with, and how its prompts open the assistant turn."""
        tok = self.tokenizer
        probe = tok.decode(render_prompt(tok, [{"role": "user", "content": "probe"}]))
        log_event(self.stage, "tokenizer", source=tok.source, kind=tok.kind, vocab_size=tok.vocab_size,
                  chat_template=tok.has_chat_template, prompt_end=probe[-40:])

    def _load_model(self, source: str, saved: dict | None):
        """(model, its config) from an HF folder, a previous stage's params, or a random init."""
        config = self.config
        if source and os.path.isfile(os.path.join(source, "config.json")):
            # The checkpoint fixes the architecture; remat / activation dtype / chunk sizes come from
            # the config so a 9B checkpoint trains with the recipe's memory settings.
            return load_hf_checkpoint(source, dtype=config.model.param_dtype, mesh=self.mesh, rules=self.train_rules,
                                      **ModelConfig.runtime_options(config.model))
        if source:
            return self._restore(source, saved)
        cfg = model_config_for(config, self.tokenizer)
        return build_model(cfg, nnx.Rngs(config.train.seed), mesh=self.mesh, rules=self.train_rules), cfg

    def _restore(self, source: str, saved: dict):
        """A previous stage's params (orbax) straight into the training layout, no random init."""
        params_dir = os.path.join(os.path.abspath(source), "params")
        if not os.path.isdir(params_dir):
            raise FileNotFoundError(f"train.init_checkpoint {source!r}: a stage output without its params/")
        # Saved before layouts were recorded = the per-layer loop layout.
        scan = bool((saved.get(PARAMS_LAYOUT_KEY) or {}).get("scan_layers", False))
        cfg = ModelConfig.from_hf_dict(saved, param_dtype=self.config.model.param_dtype,
                                       dtype=self.config.model.dtype, remat=self.config.model.remat,
                                       remat_policy=self.config.model.remat_policy, scan_layers=scan)
        graphdef, abstract = abstract_model(cfg)
        shardings = state_shardings(abstract, self.mesh, self.train_rules)
        target = jax.tree.map(lambda a, sh: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sh), abstract, shardings)
        state = ocp.StandardCheckpointer().restore(params_dir, target)
        return nnx.merge(graphdef, state), cfg

    def use_rows_prompt_style(self, rows: list[dict]) -> None:
        """The prompt style the exported params will carry: the training rows'."""
        self.prompt_style = rows_prompt_style(rows)

    def require_batch_divisible(self, rows: int, key: str) -> None:
        """Batch rows are split over the data and fsdp mesh axes: fail early, naming the key."""
        shards = self.mesh.shape["data"] * self.mesh.shape["fsdp"]
        if rows % shards:
            raise ConfigError(key, f"{rows} rows per micro-batch cannot be split over the mesh's "
                                   f"data*fsdp={shards} batch shards")

    def new_state(self, tx) -> tuple[TrainState, TrainState]:
        """(state, its shardings) with fresh optimiser state on the training layout."""
        sh = state_sharding(tx, self.init_params, self.mesh, self.train_rules)
        return init_state(tx, self.init_params, sh), sh

    def sync_sampler(self, params) -> float:
        """Move the trainer's params into the sampler (sampling layout, on device). Returns seconds."""
        t0 = time.monotonic()
        moved = reshard_for_sampling(params, self.mesh, self.sample_rules)
        if self.sampler is None:
            model = nnx.merge(self.graphdef, moved, self.rest)
            self.sampler = Sampler(model, self.tokenizer)
        else:
            self.sampler.update_params(moved)
        jax.block_until_ready(jax.tree.leaves(self.sampler.state))
        return time.monotonic() - t0

    def export(self, params, workdir: str) -> str:
        """Write the stage's final params (handoff) and, if configured, an HF folder."""
        folder = os.path.join(workdir, PARAMS_DIR)
        save_params(nnx.state(nnx.merge(self.graphdef, params, self.rest)), self.cfg, folder, self.tokenizer)
        if self.prompt_style and jax.process_index() == 0:
            with open(os.path.join(folder, PROMPT_STYLE_FILE), "w") as f:
                json.dump({"prompt_version": self.prompt_style}, f)
        if self.config.train.checkpoint.export_hf:
            try:
                model = nnx.merge(self.graphdef, params, self.rest)
                hf_dir = os.path.join(workdir, "hf_export")
                save_hf_checkpoint(model, self.cfg, hf_dir)
                if jax.process_index() == 0:
                    self.tokenizer.save(hf_dir)
            except Exception as e:  # export is a convenience: never lose the trained params over it
                log_event(self.stage, "hf_export_failed", error=str(e)[:300])
        return folder
