"""fast-downward's shared library: one loaded copy per open ALFWorld game, reused by the next game.

TextWorld's `PddlEnv` gives every game it opens a copy of its own: `fast_downward.load_lib` copies
the 34 MB `libdownward.so` into a temporary folder and loads it, so that games open at the
same time in one process keep apart (the library holds its loaded task in globals). Nothing ever
unloads a copy (`PddlEnv` has no `close`), so each one stays mapped for the rest of the process,
and its deleted file keeps its 34 MB in the temporary folder (disk, or memory on a tmpfs) beside a
few MB of the process's memory. `ALFWorldEnv` opens a game per episode, and a rollout worker lives
for the whole run: it grew by that much for every ALFWorld episode it played.

`install()` (idempotent; `ALFWorldEnv` calls it before a game opens) keeps the copy of a closed game
on a free list and hands it to the next game that opens, so a process holds as many copies as it
has games open at once. A copy still serves one game at a time. Loading the next game's task into
it replaces the one before, as TextWorld's own `reset` does with every game's copy (its `load` has
loaded the task once already). Closing a game takes the copy from the game and from its state, so
a closed game cannot reach the copy another game now uses. A game that is never closed keeps its
copy, as before.

`HR1_ALFWORLD_LIB_REUSE=0` leaves the copies to TextWorld (the baseline of
`benchmarks/bench_envs_alfworld.py --compare`).
"""
from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger(__name__)

_installed = False
_free: list = []                # loaded copies of closed games
_lock = threading.Lock()
counts = {"loaded": 0, "reused": 0}   # this process's copies: loaded anew, handed over again


def install() -> None:
    """Reuse closed games' library copies in this process (once per process); see the module docstring."""
    global _installed
    if _installed or os.environ.get("HR1_ALFWORLD_LIB_REUSE", "1") == "0":
        return
    _installed = True
    import fast_downward
    import textworld.core
    from textworld.envs.pddl import pddl
    if pddl.PddlEnv.close is not textworld.core.Environment.close:
        # another TextWorld than the pinned one, which closes its games itself: leave its copies to it
        log.warning("TextWorld's PddlEnv closes its games itself; fast-downward copies are not reused")
        return
    load_new = fast_downward.load_lib

    def load_lib():
        with _lock:
            lib = _free.pop() if _free else None
            counts["reused" if lib is not None else "loaded"] += 1
        return lib if lib is not None else load_new()

    def close(env) -> None:
        lib = env.__dict__.pop("downward_lib", None)
        state = env.__dict__.get("_pddl_state")
        if state is not None:
            state.downward_lib = None
        if lib is not None:
            with _lock:
                _free.append(lib)

    fast_downward.load_lib = load_lib
    pddl.PddlEnv.close = close


def mapped_copies() -> int:
    """Library copies this process has mapped (each loaded copy is its own file); 0 where /proc is not."""
    try:
        with open("/proc/self/maps") as f:
            return len({line.split(None, 5)[-1] for line in f if "libdownward" in line})
    except OSError:
        return 0
