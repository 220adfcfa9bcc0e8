"""Unpack the shipped ALFWorld game files (idempotent): `python -m envs.alfworld.unpack [DEST]`.

The 4,027 `game.tw-pddl` files ship as one tar.xz (see data/SOURCE.md). They are unpacked into
`$HR1_ALFWORLD_DATA` or, by default, the gitignored `envs/alfworld/data/unpacked/`. A stamp file
holding the archive's sha256 makes reruns free; a changed archive is unpacked again. Extraction
goes to a temporary sibling folder that is renamed into place, so an interrupted run never leaves
a half-filled tree behind that looks complete.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sys
import tarfile
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
ARCHIVE = DATA / "alfworld_json_2.1.1_tw-pddl.tar.xz"
ROOT_NAME = "json_2.1.1"          # top folder inside the archive; split paths start with it
STAMP = ".hr1-unpacked"


def default_dest() -> Path:
    return Path(os.environ.get("HR1_ALFWORLD_DATA") or DATA / "unpacked")


def archive_sha256(path: Path = ARCHIVE) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def is_unpacked(dest: Path, digest: str | None = None) -> bool:
    stamp = dest / STAMP
    if not stamp.is_file() or not (dest / ROOT_NAME).is_dir():
        return False
    return digest is None or stamp.read_text().strip() == digest


def unpack(dest: Path | None = None, archive: Path = ARCHIVE) -> Path:
    """Ensure the games are unpacked under `dest`; returns `dest` (which holds `json_2.1.1/`)."""
    dest = Path(dest or default_dest())
    if not archive.is_file():
        raise FileNotFoundError(f"ALFWorld archive missing: {archive}")
    digest = archive_sha256(archive)
    if is_unpacked(dest, digest):
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    # Several worker processes may start at once on a fresh machine: one unpacks, the rest wait.
    with open(dest / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not is_unpacked(dest, digest):
            _extract(dest, archive, digest)
    return dest


def checked_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """The archive's members, refusing anything but plain files and folders under ROOT_NAME/.

    The shipped archive holds only such files; this keeps an altered one from writing outside the
    destination (absolute names, `..`, links, devices) on interpreters without tarfile filters.
    """
    members = tar.getmembers()
    for m in members:
        parts = Path(m.name).parts
        if not (m.isreg() or m.isdir()) or Path(m.name).is_absolute() or ".." in parts \
                or not parts or parts[0] != ROOT_NAME:
            raise ValueError(f"ALFWorld archive holds an unsafe member: {m.name!r} "
                             f"(only files and folders under {ROOT_NAME}/ are allowed)")
        m.mode &= 0o755     # no setuid/setgid/sticky or world-writable bits from the archive
    return members


def _extract(dest: Path, archive: Path, digest: str) -> None:
    tmp = dest / f".tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.monotonic()
    with tarfile.open(archive, "r:*") as tar:
        members = checked_members(tar)
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tmp, members=members, filter="data")
        else:   # CPython 3.11.0-3.11.3 (e.g. Debian 12's 3.11.2) has no extraction filters
            tar.extractall(tmp, members=members)
    (dest / STAMP).unlink(missing_ok=True)
    shutil.rmtree(dest / ROOT_NAME, ignore_errors=True)
    os.replace(tmp / ROOT_NAME, dest / ROOT_NAME)
    shutil.rmtree(tmp, ignore_errors=True)
    (dest / STAMP).write_text(digest + "\n")
    print(f"[alfworld] unpacked {archive.name} into {dest} in {time.monotonic() - t0:.1f}s")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    dest = unpack(Path(argv[0]) if argv else None)
    print(f"[alfworld] games ready under {dest / ROOT_NAME}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
