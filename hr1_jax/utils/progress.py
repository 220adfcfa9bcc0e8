"""Progress for long work, on stderr.

On a terminal: a tqdm bar. Without one (a log file, CI, a pipe): a plain line at every 10% of the
total and at least every `HR1_PROGRESS_EVERY_S` seconds (default 30), so a log shows the work moving;
work done within 2 s prints nothing.
`HR1_PROGRESS=1` forces bars (e.g. into log files), `HR1_PROGRESS=0` turns progress output off.
"""
from __future__ import annotations

import concurrent.futures
import os
import sys
import time
from typing import Callable, Iterable, Sequence, TypeVar

from tqdm.auto import tqdm

from hr1_jax.utils.logging import iso_now

T = TypeVar("T")


def _mode() -> str:
    """One of bar, lines, off."""
    flag = os.environ.get("HR1_PROGRESS")
    if flag is not None:
        return "off" if flag.strip().lower() in ("0", "false", "") else "bar"
    return "bar" if sys.stderr.isatty() else "lines"


class PlainProgress:
    """The part of tqdm's interface the stages use (iterate, update, set_postfix, close), printing
    a plain line at every 1/`splits` of the total and when `every_s` seconds have passed, none
    before `quiet_s` (fast work stays quiet)."""

    def __init__(self, iterable: Iterable[T] | None = None, *, total: int | None = None, desc: str = "",
                 unit: str = "it", initial: int = 0, every_s: float = 30.0, splits: int = 10,
                 quiet_s: float = 2.0, clock=time.monotonic, stream=None):
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.iterable, self.total, self.desc, self.unit = iterable, total, desc, unit
        self.n = self._start_n = self._shown_n = initial
        self._every_s, self._splits, self._quiet_s, self._clock = every_s, splits, quiet_s, clock
        self._stream = stream
        self._t0 = self._shown_t = clock()
        self._shown_step = self._fraction_step()
        self._postfix = ""
        # Stages call set_postfix right after update: a due line waits for the new numbers.
        self._uses_postfix = self._pending = False

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update(1)

    def __enter__(self) -> "PlainProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _fraction_step(self) -> int:
        return self.n * self._splits // self.total if self.total else 0

    def update(self, n: int = 1) -> None:
        self._show_pending()
        self.n += n
        now = self._clock()
        if now - self._t0 < self._quiet_s:
            return
        if self._fraction_step() > self._shown_step or now - self._shown_t >= self._every_s:
            if self._uses_postfix:
                self._pending = True
            else:
                self._show(now)

    def set_postfix(self, ordered_dict=None, refresh: bool = True, **values) -> None:
        values = {**(ordered_dict or {}), **values}
        self._postfix = " ".join(f"{k}={v}" for k, v in values.items())
        self._uses_postfix = True
        self._show_pending()

    def close(self) -> None:
        self._show_pending()
        now = self._clock()
        if self.n != self._shown_n and now - self._t0 >= self._quiet_s:   # the last line: where it ended
            self._show(now)

    def _show_pending(self) -> None:
        if self._pending:
            self._pending = False
            self._show(self._clock())

    def line(self, now: float) -> str:
        elapsed = now - self._t0
        head = f"{iso_now()} {self.desc}: {self.n}"
        if self.total:
            head += f"/{self.total} {self.unit} ({100 * self.n / self.total:.0f}%)"
            done = self.n - self._start_n
            left = (self.total - self.n) * elapsed / done if done > 0 else None
            head += f" {elapsed:.0f} s" + (f", ~{left:.0f} s left" if left is not None else "")
        else:
            head += f" {self.unit} {elapsed:.0f} s"
        return head + (f" {self._postfix}" if self._postfix else "")

    def _show(self, now: float) -> None:
        self._shown_t, self._shown_n, self._shown_step = now, self.n, self._fraction_step()
        print(self.line(now), file=self._stream or sys.stderr, flush=True)


def progress(iterable: Iterable[T] | None = None, *, total: int | None = None, desc: str = "",
             unit: str = "it", **kwargs):
    """A tqdm bar on a terminal, plain progress lines otherwise (see the module docstring); use
    `.set_postfix(key=value)` for the key numbers of the stage."""
    mode = _mode()
    if mode == "lines":
        every_s = float(os.environ.get("HR1_PROGRESS_EVERY_S", "30"))
        return PlainProgress(iterable, total=total, desc=desc, unit=unit, initial=kwargs.get("initial", 0),
                             every_s=every_s)
    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr,
                disable=mode == "off", dynamic_ncols=True, **kwargs)


def map_in_chunks(fn: Callable[[list], list], items: Sequence, *, chunk: int, desc: str, unit: str = "it",
                  in_flight: int = 1) -> list:
    """`fn` (a list -> a list of the same length) over consecutive chunks of `items`, with progress:
    for work done in one call (e.g. a parallel rerun of many patches) that has no progress of its own.
    `in_flight` > 1 runs that many chunks at once (fn must be thread-safe), so the work behind fn
    never drains between chunks."""
    chunk = max(1, chunk)
    parts = [list(items[start:start + chunk]) for start in range(0, len(items), chunk)]
    done: dict[int, list] = {}
    with progress(total=len(items), desc=desc, unit=unit) as bar, \
            concurrent.futures.ThreadPoolExecutor(max(1, in_flight), thread_name_prefix="hr1-chunks") as ex:
        futures = {ex.submit(fn, part): i for i, part in enumerate(parts)}
        for fut in concurrent.futures.as_completed(futures):
            done[futures[fut]] = fut.result()
            bar.update(len(done[futures[fut]]))
    return [x for i in range(len(parts)) for x in done[i]]
