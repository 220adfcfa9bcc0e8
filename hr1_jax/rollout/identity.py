"""Task identities: paired comparison is sacred (reference spec §5.2, generalised to every benchmark).

Each episode records its task manifest (`Environment.task_manifest`: hashes of the task payload,
env version, seed). A batch identity stores `{task_id: manifest sha256}` plus a batch digest over
them; a rerun must reproduce every per-task digest exactly, or `IdentityError` is raised — the reward
re-raises it, it is never turned into a 0. Integer task ids alone never count as pairing.
"""
from __future__ import annotations

import marshal
import re

from envs.base import TASK_MANIFEST_PROTOCOL, canonical_sha256

BATCH_PROTOCOL = "hr1_batch_identity_v1"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_DIGESTS_KEPT = 4096
_digests: dict[bytes, str] = {}   # marshal bytes of a manifest body -> canonical_sha256 of it


class IdentityError(RuntimeError):
    """Baseline and rerun did not see provably identical tasks (or identity metadata is corrupt)."""


def check_manifest(manifest: dict) -> str:
    """Validate one task manifest (protocol, fields, recomputed digest); returns its sha256."""
    if not isinstance(manifest, dict) or manifest.get("protocol") != TASK_MANIFEST_PROTOCOL:
        raise IdentityError(f"task manifest missing or wrong protocol: {str(manifest)[:200]}")
    body = {k: v for k, v in manifest.items() if k != "sha256"}
    digest = manifest.get("sha256", "")
    if not _HEX64.match(str(digest)) or _body_digest(body) != digest:
        raise IdentityError(f"task manifest digest does not recompute for task {manifest.get('task_id')}")
    if not _HEX64.match(str(manifest.get("payload_sha256", ""))):
        raise IdentityError(f"task manifest for task {manifest.get('task_id')} lacks payload_sha256")
    return digest


def _body_digest(body: dict) -> str:
    """`canonical_sha256(body)`, remembered by the body's marshal bytes: a rerun batch repeats the
    baseline's manifests, and hashing each anew was parent CPU beside the rollout workers. Equal
    marshal bytes mean the same exact built-in types and values in the same order, so the same
    canonical JSON (`==` would not do: 1 == 1.0 == True hash differently); a body marshal
    refuses (a subclass, a foreign object) is hashed every time."""
    try:
        memo = marshal.dumps(body)
    except ValueError:
        return canonical_sha256(body)
    digest = _digests.get(memo)
    if digest is None:
        if len(_digests) >= _DIGESTS_KEPT:
            _digests.clear()
        digest = _digests[memo] = canonical_sha256(body)
    return digest


def batch_identity(benchmark: str, split: str, seed: int, manifests: list[dict]) -> dict:
    """The batch identity stored with a baseline / RL row: per-task digests + batch digest."""
    tasks = {}
    for m in manifests:
        digest = check_manifest(m)
        tid = str(int(m["task_id"]))
        if tasks.get(tid, digest) != digest:
            raise IdentityError(f"task {tid} appears twice with different manifests")
        tasks[tid] = digest
    ident = {"identity_protocol": BATCH_PROTOCOL, "benchmark": benchmark, "split": split, "seed": int(seed),
             "task_manifests": dict(sorted(tasks.items(), key=lambda kv: int(kv[0])))}
    ident["batch_sha256"] = batch_digest(ident)
    return ident


def batch_digest(ident: dict) -> str:
    return canonical_sha256({"protocol": ident["identity_protocol"], "benchmark": ident["benchmark"],
                             "split": ident["split"], "seed": ident["seed"],
                             "tasks": sorted([int(k), v] for k, v in ident["task_manifests"].items())})


def check_batch_identity(ident: dict, task_ids: list[int] | None = None) -> None:
    """Validate stored batch identity metadata (covers exactly `task_ids`, digests recompute)."""
    if not isinstance(ident, dict) or ident.get("identity_protocol") != BATCH_PROTOCOL:
        raise IdentityError("batch identity missing or wrong protocol")
    manifests = ident.get("task_manifests")
    if not isinstance(manifests, dict) or not manifests:
        raise IdentityError("batch identity has no task manifests")
    for tid, digest in manifests.items():
        if not str(tid).lstrip("-").isdigit() or not _HEX64.match(str(digest)):
            raise IdentityError(f"malformed task manifest entry {tid!r}: {digest!r}")
    if task_ids is not None and sorted(int(k) for k in manifests) != sorted(int(t) for t in task_ids):
        raise IdentityError(f"batch identity covers tasks {sorted(int(k) for k in manifests)}, "
                            f"row lists {sorted(task_ids)}")
    if batch_digest(ident) != ident.get("batch_sha256"):
        raise IdentityError("batch digest does not recompute (identity metadata was altered)")


def assert_rerun_matches(ident: dict, episodes: list[dict]) -> None:
    """Every rerun episode's manifest must validate and equal the baseline digest for its task;
    every baseline task must be present exactly once (with agreeing duplicates)."""
    check_batch_identity(ident)
    expected = ident["task_manifests"]
    seen: dict[str, str] = {}
    for ep in episodes:
        digest = check_manifest(ep.get("identity") or {})
        tid = str(int(ep["task_id"]))
        if tid not in expected:
            raise IdentityError(f"rerun produced task {tid}, which is not in the baseline batch")
        if digest != expected[tid]:
            raise IdentityError(f"task {tid}: rerun manifest {digest[:12]} != baseline {expected[tid][:12]} "
                                "(different task payload, env version or seed)")
        if seen.get(tid, digest) != digest:
            raise IdentityError(f"task {tid} rerun twice with different manifests")
        seen[tid] = digest
    missing = sorted(set(expected) - set(seen), key=int)
    if missing:
        raise IdentityError(f"rerun is missing tasks {missing}")
