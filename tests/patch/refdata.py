"""Paths of the reference patches shipped under tests/data (see its SOURCE.md)."""
import json
import pathlib

REF = pathlib.Path(__file__).resolve().parents[1] / "data" / "reference_patches"


def reference_patch_files() -> list[pathlib.Path]:
    return sorted(p for p in REF.rglob("*.json") if "actions" in json.loads(p.read_text(encoding="utf-8")))
