"""Paths of the reference patches shipped in hr1_jax/patch/reference_patches (see its SOURCE.md)."""
import json
import pathlib

from hr1_jax.patch.reference import REFERENCE_PATCH_DIR as REF


def reference_patch_files() -> list[pathlib.Path]:
    return sorted(p for p in REF.rglob("*.json") if "actions" in json.loads(p.read_text(encoding="utf-8")))
