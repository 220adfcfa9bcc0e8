"""Orbax checkpoints of a training run: train state (params, optimiser, step), RNG key and the
data-iterator state, saved asynchronously; restore straight into the sharded layout.

Layout: `<workdir>/checkpoints/<step>/{state,meta,hr1_manifest.json}`; `meta` is JSON (step, RNG
key data, grain iterator state, anything small the loop wants back). A kill at any point leaves the
last committed step restorable (orbax writes to a temp dir and renames on commit).

Integrity: once a step has committed, a manifest of its files (size, sha256) is written beside
them ("sealed"; an async save is sealed when the next save, `wait` or `close` finds it committed).
Orbax alone restores some damage silently (a garbled `meta` JSON comes back with wrong values), so
`restore` checks the manifest, then restores; a step that fails either is logged and the next older
kept step is tried. The failed newer steps are moved to `<checkpoints>.corrupt/` so the run can save
those steps again. A step without a manifest (killed before sealing, or written before manifests
existed) is restored unverified, relying on orbax's own checks. No valid step: `CheckpointError`.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

import jax
import numpy as np
import orbax.checkpoint as ocp

from hr1_jax.utils.logging import log_event

MANIFEST = "hr1_manifest.json"
_HASH_CHUNK = 1 << 22


class CheckpointError(RuntimeError):
    """No checkpoint in the directory passes verification and restores."""


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _digests(step_dir: str, files: list[str]) -> list[str]:
    # hashlib releases the GIL on large buffers: threads hash files in parallel
    with ThreadPoolExecutor(max_workers=min(32, os.cpu_count() or 1)) as pool:
        return list(pool.map(lambda f: _sha256(os.path.join(step_dir, f)), files))


def _step_files(step_dir: str) -> list[str]:
    files = [os.path.relpath(os.path.join(root, name), step_dir)
             for root, _, names in os.walk(step_dir) for name in names]
    return sorted(f for f in files if f != MANIFEST)


def write_manifest(step_dir: str) -> None:
    """Record the size and sha256 of every file of a committed step (written atomically)."""
    files = _step_files(step_dir)
    entries = {f: {"size": os.path.getsize(os.path.join(step_dir, f)), "sha256": d}
               for f, d in zip(files, _digests(step_dir, files))}
    path = os.path.join(step_dir, MANIFEST)
    with open(path + ".tmp", "w") as out:
        json.dump({"files": entries}, out, indent=0, sort_keys=True)
    os.replace(path + ".tmp", path)


def _read_manifest(step_dir: str) -> dict[str, tuple[int, str]]:
    with open(os.path.join(step_dir, MANIFEST)) as f:
        entries = json.load(f)["files"]
    return {str(name): (int(e["size"]), str(e["sha256"])) for name, e in entries.items()}


def manifest_problem(step_dir: str) -> str | None:
    """Why the step's files differ from its manifest (missing, resized, changed); None if they match."""
    try:
        expected = _read_manifest(step_dir)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return f"unreadable manifest: {type(e).__name__}: {e}"
    for name, (size, _) in expected.items():
        path = os.path.join(step_dir, name)
        if not os.path.isfile(path):
            return f"missing file {name}"
        if os.path.getsize(path) != size:
            return f"{name} is {os.path.getsize(path)} bytes, the manifest says {size}"
    names = sorted(expected)
    for name, digest in zip(names, _digests(step_dir, names)):
        if digest != expected[name][1]:
            return f"{name} content differs from the manifest (sha256)"
    return None


class Checkpointer:
    def __init__(self, directory: str, *, max_to_keep: int = 2, async_save: bool = True):
        self.directory = os.path.abspath(directory)
        self.async_save = async_save
        self._unsealed: list[int] = []
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True,
                                                 enable_async_checkpointing=async_save))

    def step_dir(self, step: int) -> str:
        return os.path.join(self.directory, str(step))

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, state, meta: dict) -> None:
        self._seal_finished()  # orbax waits here for the previous async save anyway
        if self.manager.save(int(step), args=ocp.args.Composite(
                state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))):
            self._unsealed.append(int(step))
        if not self.async_save:
            self._seal_finished()

    def _seal_finished(self) -> None:
        """Write the manifest of every saved step, once orbax has committed it."""
        self.manager.wait_until_finished()
        steps, self._unsealed = self._unsealed, []
        if jax.process_index() != 0:
            return
        for step in steps:
            if os.path.isdir(self.step_dir(step)):  # max_to_keep may already have removed it
                write_manifest(self.step_dir(step))

    def _restore_step(self, step: int, abstract_state):
        """(state, meta) of `step`; CheckpointError saying why it cannot be trusted."""
        if not os.path.exists(os.path.join(self.step_dir(step), MANIFEST)):
            log_event("checkpoint", "unverified", step=step, directory=self.directory,
                      reason="no manifest: killed before sealing, or saved before manifests existed")
        elif problem := manifest_problem(self.step_dir(step)):
            raise CheckpointError(problem)
        try:
            out = self.manager.restore(step, args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract_state), meta=ocp.args.JsonRestore()))
        except Exception as e:  # orbax/tensorstore raise many types on damaged files
            raise CheckpointError(f"orbax restore failed: {type(e).__name__}: {e}") from e
        return out["state"], out["meta"]

    def restore(self, abstract_state, step: int | None = None):
        """Restore into `abstract_state` (a pytree of jax.ShapeDtypeStruct carrying NamedShardings,
        e.g. from `abstract_like(state)`). Returns (state, meta), or None if nothing is saved. Without
        `step`, a newest step that fails verification falls back to the next older one."""
        steps = [step] if step is not None else sorted(self.manager.all_steps(), reverse=True)
        if not steps:
            return None
        failed: list[tuple[int, str]] = []
        for candidate in steps:
            try:
                restored = self._restore_step(candidate, abstract_state)
            except CheckpointError as e:
                log_event("checkpoint", "corrupt_step", step=candidate, directory=self.directory,
                          problem=str(e)[:500], action="trying the previous kept step")
                failed.append((candidate, str(e)))
                continue
            self._quarantine([s for s, _ in failed])
            log_event("checkpoint", "restored", step=candidate, directory=self.directory,
                      skipped_corrupt=[s for s, _ in failed])
            return restored
        raise CheckpointError(f"no valid checkpoint in {self.directory}: "
                              + "; ".join(f"step {s}: {p[:300]}" for s, p in failed))

    def _quarantine(self, steps: list[int]) -> None:
        """Move corrupt steps out of orbax's directory (kept for inspection) so they can be saved again."""
        if not steps or jax.process_index() != 0:
            return
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for step in steps:
            dest = os.path.join(self.directory + ".corrupt", f"{step}.{stamp}")
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.move(self.step_dir(step), dest)
            log_event("checkpoint", "quarantined", step=step, moved_to=dest)
        self.manager.reload()

    def wait(self) -> None:
        self._seal_finished()

    def close(self) -> None:
        self._seal_finished()
        self.manager.close()


def abstract_like(tree):
    """ShapeDtypeStructs with the concrete shardings of a live (sharded) pytree: the restore target."""
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), tree)


def key_to_json(key) -> list[int]:
    return np.asarray(jax.random.key_data(key)).astype(np.uint32).tolist()


def key_from_json(data) -> jax.Array:
    return jax.random.wrap_key_data(np.asarray(data, np.uint32))
