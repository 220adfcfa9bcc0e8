"""Hostile hooks against both walls of the sandbox: the AST sandbox + guards (first wall) and the
hook process with its address-space limit and watchdog (second wall).

Each case in `hostile_cases.CASES` runs in its own child process that limits its own address
space; the parent kills the child on a hang (60 s) or when its memory passes 2.5 GB, so a case
that is not contained fails here instead of taking the machine down. A case passes when
compile_patch rejects it, or when its calls return with no effect of the attack (marker PWNED /
nb['pwned']), sane results, plain nb, an unchanged ctx, a flat host memory (< 200 MB above the
start, peak and end), a benign reference patch that still gives {"message": "ok"}, and, for
shared-state cases, a victim patch (or the same patch in a fresh episode) that behaves exactly
as when run alone. Cases marked "rejected" must be rejected at compile time.

HR1_HOSTILE_ISOLATION=inline runs the same cases against the first wall alone;
`python -m tests.patch.hostile_cases` prints a table of verdicts.
"""
import os
from collections import Counter

import pytest

from tests.patch import hostile_cases as hc

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")


@pytest.mark.parametrize("case", hc.CASES, ids=[c.name for c in hc.CASES])
def test_hostile_hook_is_rejected_or_contained(case):
    res = hc.run_isolated(case.name)
    assert res["verdict"] in hc.allowed_verdicts(case), hc.describe(res)


def test_the_suite_covers_every_class_with_new_cases():
    from tests.patch import test_hostile
    counts = Counter(c.cls for c in hc.CASES)
    assert len(hc.CASES) >= 45
    assert all(counts[k] >= 5 for k in ("budget", "c_call", "memory", "shared", "host", "compile")), counts
    old = [c for c in getattr(test_hostile, "CASES", []) if isinstance(c, tuple) and len(c) >= 2]
    assert not {c[0] for c in old} & set(hc.CASES_BY_NAME)
    assert not {c[1] for c in old} & {c.code for c in hc.CASES}
    for case in hc.CASES:
        assert case.site in hc.SITE_WIN and case.expect in ("contained", "rejected"), case.name
        if not case.raw and case.cls not in ("shared",):
            assert "nb['pwned'] = 1" in case.code, f"{case.name}: the attack has no completion marker"


# --------------------------------------------------------------------------- the harness itself

def test_harness_reports_a_marker_effect_as_not_contained():
    res = hc.run_isolated("selftest_marker")
    assert res["verdict"] == "NOT contained" and any("attack effect" in r for r in res["reasons"]), res


def test_harness_passes_a_clean_hook():
    res = hc.run_isolated("selftest_clean")
    assert res["verdict"] == "contained", hc.describe(res)


def test_harness_kills_a_hanging_child():
    res = hc.run_isolated("selftest_hang", limit_s=2)
    assert res["verdict"] == "NOT contained" and "hung" in res["reasons"][0], res
    assert res["wall_s"] < 20


def test_harness_kills_a_child_whose_memory_blows_up():
    res = hc.run_isolated("selftest_host_bomb", rss_kill=256 * 2**20)
    assert res["verdict"] == "NOT contained" and "RSS" in res["reasons"][0], res
