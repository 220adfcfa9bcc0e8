"""Checkpoint integrity: a damaged newest step falls back to the previous kept step, with the older
step's values; when every step is damaged, a clear error names the directory.

Real orbax checkpoints of a tiny pytree on CPU, damaged the ways disks and copies damage them:
garbled bytes, truncation, missing files. Garbling `meta` is the case orbax alone restores silently.
"""
import glob
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hr1_jax.train.checkpoint import MANIFEST, CheckpointError, Checkpointer, abstract_like, key_to_json

STEPS = (1, 2)


def tiny_state(step: int) -> dict:
    return {"w": jnp.full((16, 8), float(step), jnp.float32), "b": jnp.arange(5, dtype=jnp.int32) + step}


def tiny_meta(step: int) -> dict:
    return {"step": step, "rng": key_to_json(jax.random.key(step))}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Steps 1 and 2 saved asynchronously (sealed on close); each test works on a copy."""
    directory = str(tmp_path_factory.mktemp("saved") / "checkpoints")
    ckpt = Checkpointer(directory, max_to_keep=2, async_save=True)
    for step in STEPS:
        ckpt.save(step, tiny_state(step), tiny_meta(step))
    ckpt.close()
    return directory


@pytest.fixture
def ckpt_dir(saved, tmp_path):
    directory = str(tmp_path / "checkpoints")
    shutil.copytree(saved, directory)
    return directory


def restore(directory: str):
    ckpt = Checkpointer(directory, max_to_keep=2, async_save=False)
    try:
        return ckpt.restore(abstract_like(tiny_state(0)))
    finally:
        ckpt.close()


def assert_is_step(restored, step: int) -> None:
    state, meta = restored
    np.testing.assert_array_equal(np.asarray(state["w"]), np.asarray(tiny_state(step)["w"]))
    np.testing.assert_array_equal(np.asarray(state["b"]), np.asarray(tiny_state(step)["b"]))
    assert meta == tiny_meta(step)


def garble(path: str) -> None:
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x01  # one flipped bit: the size stays the same
    open(path, "wb").write(bytes(data))


def truncate(path: str) -> None:
    os.truncate(path, os.path.getsize(path) // 2)


def files_of(directory: str, step: int, pattern: str) -> list[str]:
    paths = sorted(glob.glob(os.path.join(directory, str(step), pattern)))
    assert paths, pattern
    return paths


DAMAGE = {
    "garbled_meta": ("meta/metadata", garble),
    "garbled_array_data": ("state/d/*", garble),
    "truncated_array_data": ("state/d/*", truncate),
    "truncated_state_metadata": ("state/_METADATA", truncate),
    "missing_array_data": ("state/d/*", os.remove),
    "missing_meta": ("meta/metadata", os.remove),
    "missing_state": ("state", shutil.rmtree),
    "garbled_manifest": (MANIFEST, garble),
}


def test_intact_checkpoints_are_sealed_and_the_newest_restores(ckpt_dir):
    assert all(os.path.isfile(os.path.join(ckpt_dir, str(s), MANIFEST)) for s in STEPS)
    assert_is_step(restore(ckpt_dir), 2)


@pytest.mark.parametrize("pattern, damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_damaged_newest_step_falls_back_to_the_previous_one(ckpt_dir, pattern, damage, capsys):
    for path in files_of(ckpt_dir, 2, pattern):
        damage(path)
    assert_is_step(restore(ckpt_dir), 1)
    log = capsys.readouterr().err
    assert '"event": "corrupt_step", "step": 2' in log and '"event": "restored", "step": 1' in log
    # The damaged step is moved aside, kept for inspection.
    assert not os.path.exists(os.path.join(ckpt_dir, "2"))
    assert len(glob.glob(os.path.join(ckpt_dir + ".corrupt", "2.*", "state"))) == int(pattern != "state")


def test_run_saves_the_quarantined_step_again_and_resumes_from_it(ckpt_dir):
    garble(files_of(ckpt_dir, 2, "meta/metadata")[0])
    ckpt = Checkpointer(ckpt_dir, max_to_keep=2, async_save=True)
    assert_is_step(ckpt.restore(abstract_like(tiny_state(0))), 1)
    ckpt.save(2, tiny_state(2), tiny_meta(2))
    ckpt.close()
    assert_is_step(restore(ckpt_dir), 2)


def test_unsealed_newest_step_restores_unverified_and_falls_back_if_orbax_fails(ckpt_dir, capsys):
    """A kill between orbax's commit and the manifest leaves a step without one."""
    os.remove(os.path.join(ckpt_dir, "2", MANIFEST))
    assert_is_step(restore(ckpt_dir), 2)
    assert '"event": "unverified", "step": 2' in capsys.readouterr().err
    for path in files_of(ckpt_dir, 2, "state/d/*"):
        os.remove(path)
    assert_is_step(restore(ckpt_dir), 1)


def test_every_step_damaged_is_a_clear_error_naming_the_directory(ckpt_dir):
    for step in STEPS:
        garble(files_of(ckpt_dir, step, "meta/metadata")[0])
    with pytest.raises(CheckpointError, match="no valid checkpoint in .*checkpoints") as err:
        restore(ckpt_dir)
    assert "step 2: meta/metadata content differs" in str(err.value) and "step 1:" in str(err.value)
    assert all(os.path.isdir(os.path.join(ckpt_dir, str(s))) for s in STEPS)  # nothing moved


def test_an_explicit_damaged_step_does_not_fall_back(ckpt_dir):
    truncate(files_of(ckpt_dir, 1, "state/_METADATA")[0])
    ckpt = Checkpointer(ckpt_dir, max_to_keep=2, async_save=False)
    with pytest.raises(CheckpointError, match="step 1: state/_METADATA is"):
        ckpt.restore(abstract_like(tiny_state(0)), step=1)
    ckpt.close()


def test_empty_directory_restores_nothing(tmp_path):
    assert restore(str(tmp_path / "checkpoints")) is None
