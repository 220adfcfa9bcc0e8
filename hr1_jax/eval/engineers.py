"""Patch sources the evaluator compares, behind one call: `propose(rows) -> [Proposal]`.

- `CheckpointEngineer`: our trained engineer (a stage folder with final_params/ or an HF folder)
  with the tokenizer that checkpoint carries, greedy decoding as the reference's eval (temperature 0).
- `EndpointEngineer`: a fixed frontier editor behind an OpenAI-compatible endpoint (prefill
  `<think>\\n`, thinking on, bounded retries).
- `TeacherEngineer`: the template teacher's first (evidence-driven) program, chosen without reruns.
- `FixedPatchEngineer`: the same patch for every batch of a benchmark (the reference held-out
  patches as a "fixed editor" row, and the Self-Refine-style rule baseline).
"""
from __future__ import annotations

import dataclasses
import glob
import json
import os
import re

from hr1_jax.errors import InputError
from hr1_jax.patch.reference import HELDOUT_DIR, HELDOUT_EDITORS
from hr1_jax.train.data import row_benchmark

BASELINE_PATCH_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "baseline_patches")


@dataclasses.dataclass
class Proposal:
    text: str                  # the engineer response, parsed with the configured protocol
    engineer_tokens: int = 0


def response_for_patch(patch: dict, think: str, protocol: str) -> str:
    """A patch as an engineer response under `protocol` (so it goes through the same parser)."""
    from hr1_jax.data.rows import sft_assistant_text
    return sft_assistant_text(think, patch, protocol)


class FixedPatchEngineer:
    def __init__(self, name: str, patches: dict[str, dict], protocol: str, think: str = ""):
        self.name, self.patches, self.protocol, self.think = name, patches, protocol, think

    def propose(self, rows: list[dict]) -> list[Proposal]:
        out = []
        for row in rows:
            patch = self.patches.get(row_benchmark(row))
            text = response_for_patch(patch, self.think or patch.get("description", ""), self.protocol) if patch else ""
            out.append(Proposal(text))
        return out


def self_refine_engineer(protocol: str) -> FixedPatchEngineer:
    patches = {}
    for path in sorted(glob.glob(os.path.join(BASELINE_PATCH_DIR, "self_refine_*.json"))):
        with open(path) as f:
            patch = json.load(f)
        patches[patch["benchmark"]] = patch
    return FixedPatchEngineer("Self-Refine rule", patches, protocol,
                              think="- fixed rule: reflect and change approach after an observable failure")


def reference_patch_engineer(seed_dir: str, protocol: str, editor: str = "harness-r1") -> FixedPatchEngineer:
    """The shipped held-out patches of one reference editor and evidence seed, one per benchmark."""
    folder = os.path.join(HELDOUT_DIR, editor, seed_dir)
    patches = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            data = json.load(f)
        patch = data.get("patch", data) if isinstance(data, dict) else None
        if isinstance(patch, dict) and "actions" in patch:
            patches[os.path.splitext(os.path.basename(path))[0]] = patch
    if not patches:
        raise FileNotFoundError(f"no reference patches under {folder}")
    return FixedPatchEngineer(f"Reference {editor} patch ({seed_dir})", patches, protocol)


class TeacherEngineer:
    name = "Template teacher"

    def __init__(self):
        from hr1_jax.train.teacher.template import TemplateTeacher
        self.teacher = TemplateTeacher(max_candidates=1)

    def propose(self, rows: list[dict]) -> list[Proposal]:
        out = []
        for row in rows:
            responses = self.teacher.responses(row)
            out.append(Proposal(responses[0][1] if responses else ""))
        return out


class EndpointEngineer:
    def __init__(self, base_url: str, model: str, *, max_tokens: int = 12288, name: str = "",
                 api_key_env: str = "OPENAI_API_KEY"):
        from hr1_jax.train.teacher.endpoint import EndpointTeacher
        self.name = name or f"Fixed editor ({model})"
        self.client = EndpointTeacher(base_url, model, max_tokens=max_tokens, api_key_env=api_key_env)

    def propose(self, rows: list[dict]) -> list[Proposal]:
        out = []
        for row in rows:
            text = self.client.complete(row["prompt"]) or ""
            out.append(Proposal(text, engineer_tokens=len(text) // 4))  # server usage not returned: ~4 chars/token
        return out


STAGE_LABELS = {"sft": "SFT engineer", "grpo": "GRPO engineer"}
PARAMS_FOLDERS = ("final_params", "best_params")   # a stage's handoff params, GRPO's best validation step


def checkpoint_name(checkpoint: str) -> str:
    """A method name from the run: `runs/demo/grpo[/final_params]` -> "GRPO engineer (demo)",
    `runs/demo/grpo/seed1` -> "GRPO engineer seed1 (demo)", `.../seed1/best_params` -> "GRPO engineer
    seed1 best (demo)"."""
    path = os.path.normpath(os.path.abspath(checkpoint))
    variant = " best" if os.path.basename(path) == "best_params" else ""   # GRPO's validation-chosen step
    if os.path.basename(path) in PARAMS_FOLDERS:
        path = os.path.dirname(path)
    if re.fullmatch(r"seed\d+", os.path.basename(path)):   # one of several runs of a stage
        variant, path = f" {os.path.basename(path)}{variant}", os.path.dirname(path)
    stage, run = os.path.basename(path), os.path.basename(os.path.dirname(path))
    label = STAGE_LABELS.get(stage, f"Engineer {stage}") + variant
    return f"{label} ({run})" if run else label


class CheckpointEngineer:
    def __init__(self, config, checkpoint: str, *, max_new_tokens: int, name: str = ""):
        from hr1_jax.eval.prompt_styles import checkpoint_prompt_style
        from hr1_jax.train.engine import Engineer
        config = config.copy_and_resolve_references()
        with config.unlocked():
            config.train.init_checkpoint = checkpoint
        self.name = name or checkpoint_name(checkpoint)
        self.prompt_style = checkpoint_prompt_style(checkpoint, config.eval.prompt_style)
        self.engineer = Engineer(config, stage="eval")
        self.engineer.sync_sampler(self.engineer.init_params)
        self.max_new_tokens = max_new_tokens
        self.seed = int(config.seed)

    def prompt_rows(self, rows: list[dict]) -> list[dict]:
        """The rows as this engineer is asked: in the prompt style it was trained with."""
        from hr1_jax.eval.prompt_styles import restyle
        return [restyle(r, self.prompt_style) for r in rows]

    def propose(self, rows: list[dict]) -> list[Proposal]:
        from hr1_jax.train.evaluate import engineer_responses
        texts = engineer_responses(self.engineer.sampler, self.engineer.tokenizer, self.prompt_rows(rows),
                                   max_new_tokens=self.max_new_tokens, seed=self.seed)
        tok = self.engineer.tokenizer
        return [Proposal(t, engineer_tokens=len(tok.encode(t))) for t in texts]


def reference_spec(spec: str) -> tuple[str, str]:
    """`reference:<seed dir>` (Harness-R1's) or `reference:<editor>/<seed dir>` -> (editor, seed dir)."""
    body = spec.split(":", 1)[1]
    editor, _, seed_dir = body.rpartition("/")
    editor = editor or "harness-r1"
    if editor not in HELDOUT_EDITORS:
        raise InputError(f"{spec!r}: unknown reference editor {editor!r}; shipped: {', '.join(HELDOUT_EDITORS)}")
    if not os.path.isdir(os.path.join(HELDOUT_DIR, editor, seed_dir)):
        seeds = sorted(os.listdir(os.path.join(HELDOUT_DIR, editor)))
        raise InputError(f"{spec!r}: no shipped patches for seed {seed_dir!r}; {editor} has {', '.join(seeds)}")
    return editor, seed_dir


def make_engineer(config, spec: str, *, name: str = "", model: str = "", api_key_env: str = "OPENAI_API_KEY"):
    """`eval.engineer` -> a patch source: a checkpoint folder, an http(s) endpoint (with `model`,
    default `eval.engineer_model`), `teacher`, or `reference:[<editor>/]<seed dir>` (e.g.
    `reference:seed20260720`, `reference:qwen3.5-397b/seed20260721`)."""
    protocol = config.patch_protocol.response_protocol
    if spec == "teacher":
        eng = TeacherEngineer()
    elif spec.startswith("reference:"):
        eng = reference_patch_engineer(reference_spec(spec)[1], protocol, editor=reference_spec(spec)[0])
    elif spec.startswith(("http://", "https://")):
        return EndpointEngineer(spec, model or config.eval.engineer_model, max_tokens=config.eval.max_new_tokens,
                                name=name, api_key_env=api_key_env)
    elif os.path.isdir(spec):
        return CheckpointEngineer(config, spec, max_new_tokens=config.eval.max_new_tokens, name=name)
    else:
        raise InputError(f"eval.engineer {spec!r}: expected a checkpoint folder, an http(s):// endpoint, "
                         f"'teacher' or 'reference:[<editor>/]<seed dir>'")
    if name:
        eng.name = name
    return eng
