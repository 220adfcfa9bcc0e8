"""Code the interpreter starts during a hook (GC callbacks, finalizers) is not the hook's: a budget
error raised inside it is swallowed as "Exception ignored" and switches tracing off, after which the
hook ran past every budget. Such frames are left alone; the hook is still stopped."""
import gc

from hr1_jax.patch import compile_hook
from hr1_jax.patch.runner import call_hook


def test_gc_callbacks_during_a_hook_run_to_completion_and_the_hook_still_times_out():
    calls = {"started": 0, "finished": 0}

    def slow_callback(phase, info):
        calls["started"] += 1
        total = 0
        for i in range(3000):  # most of the hook's wall time is spent here
            total += i
        calls["finished"] += 1

    # Keeps allocating containers so the collector (and its callbacks) runs during the hook.
    fn = compile_hook("def hook(ctx, nb):\n    out = []\n    for i in range(1000):\n        for j in range(1000):\n"
                      "            out.append([i])\n            if len(out) > 500:\n                out = []\n"
                      "    return None\n", "webshop")
    threshold = gc.get_threshold()
    gc.callbacks.append(slow_callback)
    gc.set_threshold(5)
    try:
        outcome = call_hook(fn, {}, {}, "make_pre_hint", time_budget_s=0.05, line_budget=10**9)
    finally:
        gc.callbacks.remove(slow_callback)
        gc.set_threshold(*threshold)
    assert outcome.status == "timeout" and "wall-clock" in outcome.error, outcome
    assert calls["started"] > 0 and calls["started"] == calls["finished"]
