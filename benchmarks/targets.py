"""Issue 17's acceptance targets, in one place for the scripts that measure them, and the verdict
lines they print under their tables: `bench_model.py` (train, top-p and decode ratios),
`bench_patch.py` (hook calls, validation), `bench_reward.py` (rerun scaling). A verdict is only ever
computed from what the same run measured."""
from __future__ import annotations

TRAIN_RATIO = 1.0               # ours/torch train step, at each of TRAIN_CONFIGS
TRAIN_CONFIGS = ("demo", "20m")
TRAIN_PEAK_SHARE = 0.5          # of the run's fp32 matmul peak, at PEAK_CONFIG
PEAK_CONFIG = "20m"
TOP_P_OVER_GREEDY = 1.5         # top-p step time over greedy, at every decode point
DECODE_RATIO = 3.0              # ours/HF greedy, at DECODE_POINT of DECODE_CONFIG
DECODE_POINT = (16, 512)
# The config the decode target was set on: issue 17 took it from the measurement whose decode goal
# was "tiny config" (HF ~1.1 ms a step at any batch, ours 2.0x at 16 x 512; benchmarks/README.md).
# The other configs' ratios at the point are printed beside it, as figures, not verdicts.
DECODE_CONFIG = "tiny"
HOOK_CALL_US = {"webshop": 20.0, "alfworld": 40.0}   # per call, first wall
VALIDATION_MS = 5.0             # the slowest shipped patch
RERUN_SPEEDUP = 1.8             # 2 workers over 1 on bench_reward's 32-response group


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def decimals(value: float, bound: float, start: int, *, at_least: bool = True, scale: float = 1.0) -> int:
    """Decimals (from `start`, of value * scale) enough for the printed value to sit on the same side
    of the bound as the value: 1.7996 against 1.8 prints as 1.7996, not as a failing "1.80"."""
    holds = (lambda v: v >= bound * scale) if at_least else (lambda v: v <= bound * scale)
    d = start
    while d < start + 4 and holds(round(value * scale, d)) != holds(value * scale):
        d += 1
    return d


def ratio_text(value: float, bound: float, *, at_least: bool = True) -> str:
    return f"{value:.{decimals(value, bound, 2, at_least=at_least)}f}"


def _at_least(label: str, value: float | None, bound: float, shown, bound_text: str) -> str:
    """"label: value >= bound: PASS|FAIL", or "not measured" where the run has no value;
    `shown(value, bound)` prints the value."""
    if value is None:
        return f"{label}: n/a >= {bound_text}: not measured"
    return f"{label}: {shown(value, bound)} >= {bound_text}: {verdict(value >= bound)}"


def model_lines(rows: list[dict]) -> list[str]:
    """`bench_model.py`'s verdicts from its result rows (one per config): a target whose config or
    point this run did not measure (--configs, --skip-train, --decode, --no-torch) is said to be so."""
    by_name = {r["config"]: r for r in rows}
    ratio_x = lambda v, bound: f"{ratio_text(v, bound)}x"  # noqa: E731
    lines = [_at_least(f"train ours/torch at {name}", by_name.get(name, {}).get("train_ratio"), TRAIN_RATIO,
                       ratio_x, f"{TRAIN_RATIO:.1f}") for name in TRAIN_CONFIGS]
    lines.append(_at_least(f"train at {PEAK_CONFIG}, share of the run's matmul peak",
                           by_name.get(PEAK_CONFIG, {}).get("ours_train_peak_frac"), TRAIN_PEAK_SHARE,
                           lambda v, bound: f"{v:.{decimals(v, bound, 0, scale=100)}%}",
                           f"{TRAIN_PEAK_SHARE:.0%}"))
    points = [(r["config"], d) for r in rows for d in r.get("decode", [])]
    if points:
        name, worst = max(points, key=lambda p: p[1]["top_p_over_greedy"])
        worst_text = ratio_text(worst["top_p_over_greedy"], TOP_P_OVER_GREEDY, at_least=False)
        lines.append(f"top-p / greedy time, worst of {len(points)} points: {worst_text} "
                     f"({name} {worst['batch']} x {worst['new_tokens']}) <= {TOP_P_OVER_GREEDY}: "
                     f"{verdict(worst['top_p_over_greedy'] <= TOP_P_OVER_GREEDY)}")
    else:
        lines.append(f"top-p / greedy time <= {TOP_P_OVER_GREEDY}: not measured")
    at_point = [(r["config"], d) for r in rows for d in r.get("decode", [])
                if (d["batch"], d["new_tokens"]) == DECODE_POINT]
    rows_x_new = f"{DECODE_POINT[0]} x {DECODE_POINT[1]}"
    target = dict(at_point).get(DECODE_CONFIG, {})
    lines.append(_at_least(f"decode ours/HF at {rows_x_new}, {DECODE_CONFIG}", target.get("ratio"), DECODE_RATIO,
                           ratio_x, f"{DECODE_RATIO:.0f}x"))
    lines += [f"decode ours/HF at {rows_x_new}, {name} (beside the target, set at {DECODE_CONFIG}): "
              f"{d['ratio']:.2f}x" for name, d in at_point if name != DECODE_CONFIG and d.get("ratio") is not None]
    return lines


def rerun_line(balanced: float | None, median: float) -> str:
    """`bench_reward.py`'s verdict for 2 workers over 1: on the position-balanced speedup where both
    orders of the cold groups ran (the figure its docstring says to read), else on the median."""
    value, which = (balanced, "position-balanced") if balanced is not None else (median, "median")
    return (f"2 workers over 1, {which}: {ratio_text(value, RERUN_SPEEDUP)}x >= {RERUN_SPEEDUP}x: "
            f"{verdict(value >= RERUN_SPEEDUP)}")
