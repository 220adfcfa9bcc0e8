"""What else the machine was doing while a benchmark ran, for the line that says so.

The load average counts this machine's own runnable work. On a VM, CPU time the hypervisor gave to
other guests shows up only as *steal* (`/proc/stat`): on a 2-core KVM box it was 18% of all CPU time
over 16 busy minutes whose load average read 1.0-1.7, and a decode step's time swung 1.6x between
back-to-back calls. So a benchmark notes both: load averages, and the steal share of all CPUs' time
over the window it timed (`CpuWindow`). Where /proc is missing (not Linux) each reads "n/a".
`interpreter_facts` names the Python that ran: pure-Python costs move with its build.
"""
from __future__ import annotations

import os
import platform
import sys

# /proc/stat's aggregate "cpu" line: user nice system idle iowait irq softirq steal [guest guest_nice].
# guest and guest_nice are already counted in user and nice, so they are left out of the total.
_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def parse_cpu_ticks(stat_text: str) -> dict[str, int] | None:
    """The aggregate `cpu` line of /proc/stat as {field: ticks}; None if there is none. Kernels that
    print fewer fields (steal came in 2.6.11) count the missing ones as 0."""
    for line in stat_text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = [int(v) for v in parts[1:1 + len(_FIELDS)]]
            return dict(zip(_FIELDS, values + [0] * (len(_FIELDS) - len(values))))
    return None


def read_cpu_ticks(path: str = "/proc/stat") -> dict[str, int] | None:
    try:
        with open(path) as f:
            return parse_cpu_ticks(f.read())
    except OSError:
        return None


def steal_share(start: dict[str, int] | None, end: dict[str, int] | None) -> float | None:
    """Steal ticks over all ticks between two readings (0..1); None without both or if no tick passed."""
    if start is None or end is None:
        return None
    total = sum(end[k] - start[k] for k in _FIELDS)
    return (end["steal"] - start["steal"]) / total if total > 0 else None


def format_share(share: float | None) -> str:
    return "n/a" if share is None else f"{100 * share:.0f}%"


def load_averages() -> tuple[float, float, float] | None:
    try:
        return os.getloadavg()
    except (AttributeError, OSError):
        return None


def load_text() -> str:
    """'1.07 0.83 0.37' (1, 5 and 15 minutes) or 'n/a'."""
    loads = load_averages()
    return "n/a" if loads is None else " ".join(f"{x:.2f}" for x in loads)


def load_1min() -> float | None:
    loads = load_averages()
    return None if loads is None else loads[0]


class CpuWindow:
    """Steal share since construction: `CpuWindow().steal()` after the timed work."""

    def __init__(self, path: str = "/proc/stat"):
        self.path = path
        self.start = read_cpu_ticks(path)

    def steal(self) -> float | None:
        return steal_share(self.start, read_cpu_ticks(self.path))

    def steal_text(self) -> str:
        return format_share(self.steal())


def libpython_linkage() -> str:
    """'a shared libpython' or 'libpython linked in' (from this process's mappings, as
    launch/pick_python.sh reads them), or 'libpython linkage unknown' where there are none."""
    try:
        with open("/proc/self/maps") as maps:
            return "a shared libpython" if "libpython" in maps.read() else "libpython linked in"
    except OSError:
        return "libpython linkage unknown"


def interpreter_facts() -> dict:
    """The running interpreter, for a benchmark's json line."""
    return {"python": platform.python_version(), "executable": sys.executable, "libpython": libpython_linkage()}
