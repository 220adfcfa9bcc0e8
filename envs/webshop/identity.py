"""WebShop paired-identity protocol (reference spec §5.2): a per-task manifest that proves a
baseline run and a patched rerun saw the same goal, instruction and catalog prices.

Hashes are `envs.base.canonical_sha256` (SHA-256 of the compact JSON of the canonical form).
"""
from __future__ import annotations

import hashlib

from envs.base import canonical_sha256

MANIFEST_PROTOCOL = "webshop_task_manifest_v1"


def digest(obj) -> str:
    return canonical_sha256(obj)


def task_manifest(*, goal_seed: int, index: int, instruction: str, goal: dict,
                  product_prices_sha256: str, env_version: str, catalog_seed: int) -> dict:
    """The manifest of one goal: the reference payload (+ env_version and catalog_seed, which
    define the substitute's catalog) and the `sha256` of that payload."""
    payload = {
        "protocol": MANIFEST_PROTOCOL,
        "goal_seed": goal_seed,
        "index": index,
        "instruction_sha256": hashlib.sha256(instruction.encode("utf-8")).hexdigest(),
        "goal_sha256": digest(goal),
        "product_prices_sha256": product_prices_sha256,
        "env_version": env_version,
        "catalog_seed": catalog_seed,
    }
    return dict(payload, sha256=digest(payload))


def verify_manifest(manifest: dict) -> bool:
    """True when `manifest` is well formed and its `sha256` recomputes."""
    if not isinstance(manifest, dict) or manifest.get("protocol") != MANIFEST_PROTOCOL:
        return False
    payload = {k: v for k, v in manifest.items() if k != "sha256"}
    hexes = ("instruction_sha256", "goal_sha256", "product_prices_sha256", "sha256")
    if not all(isinstance(manifest.get(k), str) and len(manifest[k]) == 64 for k in hexes):
        return False
    return digest(payload) == manifest["sha256"]
