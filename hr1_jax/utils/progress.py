"""Progress bars for long work: tqdm to stderr, silent when not on a terminal unless forced.

`HR1_PROGRESS=1` forces bars on (e.g. in log files), `HR1_PROGRESS=0` turns them off.
"""
from __future__ import annotations

import os
import sys
from typing import Iterable, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")


def _enabled() -> bool:
    flag = os.environ.get("HR1_PROGRESS")
    if flag is not None:
        return flag not in ("0", "false", "")
    return sys.stderr.isatty()


def progress(iterable: Iterable[T] | None = None, *, total: int | None = None, desc: str = "",
             unit: str = "it", **kwargs) -> tqdm:
    """A tqdm bar on stderr; use `.set_postfix(key=value)` for the key numbers of the stage."""
    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr,
                disable=not _enabled(), dynamic_ncols=True, **kwargs)
