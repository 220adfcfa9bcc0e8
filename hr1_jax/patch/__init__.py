"""Patch protocol: response parsing, patch schema + normalisation, AST sandbox, hook runner.

Public API (other packages code against these names):
  parse_response(text, benchmark, protocol) -> normalised patch dict
  extract_patch_json(text) -> raw patch dict
  normalize_patch(obj, benchmark, *, require_code_hook_only, reject_runtime_noop,
                  enforce_hook_once, max_total_code_chars) -> dict
  compile_hook(code, benchmark) -> hook function
  run_hook(fn, ctx, nb, hook_name, *, time_budget_s, line_budget) -> dict | None
  compile_patch(patch, benchmark, *, time_budget_s, line_budget) -> CompiledPatch
  CompiledPatch.call(hook_name, ctx, nb) -> list[HookOutcome]
  schema_prompt / system_prompt / user_prompt_prefix (hr1_jax.patch.prompts)
  PatchError(code, message), HookCompileError
"""
from hr1_jax.patch.compiled import CompiledPatch, compile_patch
from hr1_jax.patch.errors import HookCompileError, PatchError
from hr1_jax.patch.parse import PROTOCOLS, build_response, extract_patch_json, extract_response_json, parse_response
from hr1_jax.patch.prompts import EVIDENCE_MARKER, schema_prompt, schema_style, system_prompt, user_prompt_prefix
from hr1_jax.patch.runner import HOOK_NAMES, HookOutcome, call_hook, normalize_hook_result, run_hook
from hr1_jax.patch.sandbox import compile_hook
from hr1_jax.patch.schema import (SCHEMA_VERSION, normalize_options, normalize_patch,
                                  require_code_hook_only_patch)

__all__ = [
    "CompiledPatch", "EVIDENCE_MARKER", "HOOK_NAMES", "HookCompileError", "HookOutcome",
    "PROTOCOLS", "PatchError", "SCHEMA_VERSION", "build_response", "call_hook",
    "compile_hook", "compile_patch", "extract_patch_json", "extract_response_json", "normalize_hook_result",
    "normalize_options", "normalize_patch", "parse_response", "require_code_hook_only_patch", "run_hook",
    "schema_prompt", "schema_style", "system_prompt", "user_prompt_prefix",
]
