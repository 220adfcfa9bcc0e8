"""Reports people can read: `report.md` and a self-contained `report.html` (plots inlined as PNG).

Provenance first (commit, config hash, date, target, engineer, data sources). Tables: the main
table in the reference's format (each benchmark's columns as its descriptor's `ReportColumns` lists
them: task families, mean score, success; then the average) with the number of tasks in every cell, per-benchmark paired deltas with bootstrap intervals
(not-significant gains marked), rescued/regressed counts, costs; then one readable view per patch:
its think text, its hooks as highlighted code, how often each hook fired with which effect, and
the tasks it rescued or broke. The same deltas go to TensorBoard as scalars.

Footnote marks, one meaning each: † an upper reference (it peeks at the outcome); a benchmark's
own mark and note come from its descriptor (WebShop's ‡ names its data).
"""
from __future__ import annotations

import base64
import html
import io
import keyword
import os
import re
import tokenize
from collections import defaultdict

import numpy as np

from envs.registry import benchmark, names
from hr1_jax.eval import provenance as prov
from hr1_jax.eval.results import EvalResult, MethodResult
from hr1_jax.eval.stats import paired_bootstrap_ci, stratified_mean_ci, summarize_pairs
from hr1_jax.utils.jsonsafe import write_json
from hr1_jax.utils.tensorboard import TensorBoardWriter

UPPER_MARK = "†"


def _columns(bench: str):
    return benchmark(bench).report


# ----------------------------------------------------------------------------------------------
# numbers

def _by_benchmark(method: MethodResult) -> dict[str, list]:
    groups: dict[str, list] = defaultdict(list)
    for p in method.pairs:
        groups[p.benchmark].append(p)
    return groups


def display_name(method: MethodResult) -> str:
    return method.name + (f" {UPPER_MARK}" if method.upper_reference else "")


def _cells(pairs: list, which: str, threshold: float) -> dict:
    """One row's cells (success %, mean scores, task families) with their task counts."""
    cells: dict = {}
    by_bench: dict[str, list] = defaultdict(list)
    for p in pairs:
        by_bench[p.benchmark].append(p)
    for bench in names():
        group = by_bench.get(bench)
        if not group:
            continue
        rewards = np.array([getattr(p, which) for p in group])
        cells[f"{bench}_success"] = 100.0 * float(np.mean(rewards >= threshold))
        cells[f"{bench}_n"] = len(group)
        if _columns(bench).score:
            cells[f"{bench}_score"] = 100.0 * float(np.mean(rewards))
    for bench in names():
        for family, _ in _columns(bench).families:
            group = [getattr(p, which) for p in by_bench.get(bench, []) if p.family == family]
            if group:
                cells[f"{bench}_{family}"] = 100.0 * float(np.mean(np.array(group) >= threshold))
                cells[f"{bench}_{family}_n"] = len(group)
    parts = [cells[f"{b}_success"] for b in names() if f"{b}_success" in cells]
    cells["average"] = float(np.mean(parts)) if parts else float("nan")
    cells["average_n"] = sum(cells.get(f"{b}_n", 0) for b in names())
    return cells


def main_table_rows(result: EvalResult) -> list[dict]:
    """Rows of the main table: the shared no-patch baseline first, then each method (patched);
    `<column>_n` is the number of tasks behind the column's cell."""
    rows = []
    if result.methods:
        rows.append({"method": "No patch (baseline)",
                     **_cells(result.methods[0].pairs, "baseline_reward", result.threshold)})
    for m in result.methods:
        rows.append({"method": display_name(m), **_cells(m.pairs, "patched_reward", result.threshold)})
    return rows


def ablation_rows(result: EvalResult, *, n_boot: int = 2000, seed: int = 0) -> list[dict]:
    """Per lifecycle ablation: the success change against its full patch, paired per task
    (benchmark, seed, task id), per benchmark and on Avg (the mean of the benchmark changes, its
    interval from resampling tasks within each benchmark), in pp."""
    by_name = {m.name: m for m in result.methods}
    rows = []
    for m in result.methods:
        full = by_name.get(m.ablation_of)
        if full is None:
            continue
        ok = lambda pairs: {(p.benchmark, p.seed, p.task_id): float(p.patched_reward >= result.threshold)
                            for p in pairs}
        ablated, reference = ok(m.pairs), ok(full.pairs)
        row = {"method": m.name, "full": full.name, "site": m.ablated_site}
        groups = {}
        for bench in names():
            keys = sorted(k for k in set(ablated) & set(reference) if k[0] == bench)
            if keys:
                groups[bench] = [ablated[k] - reference[k] for k in keys]
                mean, lo, hi = paired_bootstrap_ci(groups[bench], n_boot=n_boot, seed=seed,
                                                   clusters=[k[2] for k in keys])
                row[bench] = {"mean": 100 * mean, "ci95": [100 * lo, 100 * hi], "n": len(keys)}
        if groups:
            mean, lo, hi = stratified_mean_ci(groups, n_boot=n_boot, seed=seed)
            row["average"] = {"mean": 100 * mean, "ci95": [100 * lo, 100 * hi], "n": sum(map(len, groups.values()))}
        rows.append(row)
    return rows


def delta_rows(result: EvalResult, *, n_boot: int = 2000, seed: int = 0) -> list[dict]:
    rows = []
    for m in result.methods:
        for bench, pairs in sorted(_by_benchmark(m).items(), key=lambda kv: names().index(kv[0])):
            s = summarize_pairs([p.baseline_reward for p in pairs], [p.patched_reward for p in pairs],
                                threshold=result.threshold, n_boot=n_boot, seed=seed,
                                clusters=[p.task_id for p in pairs])
            base_pass = np.mean([p.baseline_reward >= result.threshold for p in pairs])
            patched_pass = np.mean([p.patched_reward >= result.threshold for p in pairs])
            rows.append({"method": display_name(m), "benchmark": bench, **s.to_dict(),
                         "delta_pass_rate": float(patched_pass - base_pass),
                         "seeds": len({p.seed for p in pairs})})
    return rows


# ----------------------------------------------------------------------------------------------
# plots

def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_deltas(deltas: list[dict]) -> str:
    """Grouped bars per benchmark with their 95% intervals; the legend sits above the axes so it
    never covers a bar or an error bar."""
    plt = _pyplot()
    methods = list(dict.fromkeys(d["method"] for d in deltas))
    benches = [b for b in names() if any(d["benchmark"] == b for d in deltas)]
    fig, ax = plt.subplots(figsize=(min(10.0, 2.0 + 2.6 * len(benches)), 3.6))
    width = 0.8 / max(1, len(methods))
    for i, m in enumerate(methods):
        xs, ys, lo, hi = [], [], [], []
        for j, b in enumerate(benches):
            d = next((d for d in deltas if d["method"] == m and d["benchmark"] == b), None)
            if d is None:
                continue
            xs.append(j + (i - (len(methods) - 1) / 2) * width)
            ys.append(100 * d["mean_delta"])
            lo.append(100 * (d["mean_delta"] - d["ci_low"]))
            hi.append(100 * (d["ci_high"] - d["mean_delta"]))
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, label=m, error_kw={"lw": 1})
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(range(len(benches)), [_columns(b).label for b in benches], fontsize=9)
    ax.set_ylabel("mean reward delta (pp), 95% CI", fontsize=9)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.01), ncol=2 if len(methods) > 3 else 1,
              fontsize=8, frameon=False)
    return _png(fig)


def plot_rescued_regressed(deltas: list[dict]) -> str:
    """One horizontal row per (method, benchmark): tasks rescued to the right, broken to the left,
    labels horizontal at a readable size."""
    plt = _pyplot()
    labels = [f"{d['method']} · {_columns(d['benchmark']).label}" for d in deltas]
    fig, ax = plt.subplots(figsize=(5.5, 0.9 + 0.3 * len(labels)))
    ys = np.arange(len(labels))[::-1]
    ax.barh(ys, [d["rescued"] for d in deltas], 0.7, label="rescued (failed → passed)", color="#2a9d8f")
    ax.barh(ys, [-d["regressed"] for d in deltas], 0.7, label="regressed (passed → failed)", color="#e76f51")
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(ys, labels, fontsize=9)
    ax.set_xlabel("tasks", fontsize=9)
    ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{abs(v):.0f}"))   # counts, both sides
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.01), ncol=2, fontsize=8, frameon=False)
    return _png(fig)


# ----------------------------------------------------------------------------------------------
# code highlighting (stdlib tokenize; no extra dependency)

_TOKEN_CLASS = {tokenize.STRING: "s", tokenize.COMMENT: "c", tokenize.NUMBER: "n"}


def highlight_python(code: str) -> str:
    """HTML for `code` with keyword/string/comment/number spans; falls back to escaped text."""
    lines = code.splitlines(keepends=True)
    offsets = np.cumsum([0] + [len(x) for x in lines]).tolist()
    out, pos = [], 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            start = offsets[tok.start[0] - 1] + tok.start[1] if tok.start[0] - 1 < len(offsets) else len(code)
            end = offsets[tok.end[0] - 1] + tok.end[1] if tok.end[0] - 1 < len(offsets) else len(code)
            if start < pos:
                continue
            out.append(html.escape(code[pos:start]))
            text = html.escape(code[start:end])
            cls = _TOKEN_CLASS.get(tok.type)
            if tok.type == tokenize.NAME and keyword.iskeyword(tok.string):
                cls = "k"
            out.append(f'<span class="{cls}">{text}</span>' if cls else text)
            pos = end
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return html.escape(code)
    out.append(html.escape(code[pos:]))
    return "".join(out)


# ----------------------------------------------------------------------------------------------
# rendering

def _fmt(x, nd=1):
    return "–" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{nd}f}"


def main_columns() -> list[tuple[str, str, str]]:
    """(key, header, the key of the cell's task count) per main-table column: the paper's layout,
    each benchmark's families, score and success in registry order, then the average."""
    out = []
    for bench in names():
        c = _columns(bench)
        out += [(f"{bench}_{f}", h, f"{bench}_{f}_n") for f, h in c.families]
        out += [(f"{bench}_score", c.score, f"{bench}_n")] if c.score else []
        out.append((f"{bench}_success", c.success, f"{bench}_n"))
    return out + [("average", "Avg", "average_n")]


def _delta_cell(d) -> str:
    sig = "" if d["significant"] else " (n.s.)"
    return (f"{100 * d['mean_delta']:+.1f} [{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}]{sig}")


def footnotes(result: EvalResult, main_rows, sources: dict | None = None) -> list[str]:
    """One line per mark used (a benchmark's own from its data-source line in `sources`), plus a
    warning when rows stand on fewer tasks than the baseline."""
    notes = [f"{UPPER_MARK} upper reference, not a patch method: {m.description or 'it peeks at the outcome'}."
             for m in result.methods if m.upper_reference][:1]
    for bench in names():
        note = _columns(bench).footnote((sources or {}).get(bench, ""))
        if note and any(r.get(f"{bench}_n") for r in main_rows):
            notes.append(note)
    base = main_rows[0] if main_rows else {}
    fewer = [r["method"] for r in main_rows[1:]
             if any(0 < r.get(f"{b}_n", 0) < base.get(f"{b}_n", 0) for b in names())]
    if fewer:
        notes.append(f"n = tasks behind each cell. Fewer tasks than the baseline row: {', '.join(fewer)} "
                     "(held-out transfer leaves its evidence tasks out); compare these rows through their "
                     "paired deltas, which use the same tasks on both sides.")
    return notes


def _provenance_lines(p: dict) -> list[tuple[str, str]]:
    lines = [("commit", p["commit"]), ("config", p["config"]), ("date", p["date"]), ("target", p["target"])]
    if p.get("engineer"):
        lines.append(("engineer", p["engineer"]))
    lines += [("data", source) for source in p["data"].values()]
    return lines


def _ci_cell(cell) -> str:
    if not cell:
        return "–"
    lo, hi = cell["ci95"]
    sig = "" if lo > 0 or hi < 0 else " (n.s.)"
    return f"{cell['mean']:+.1f} [{lo:+.1f}, {hi:+.1f}]{sig} ({cell['n']})"


def _ablation_headers() -> list[str]:
    return [_columns(b).ablation for b in names()] + ["Avg"]


def ablation_markdown(ablation: list[dict]) -> list[str]:
    if not ablation:
        return []
    headers = _ablation_headers()
    lines = ["", "## Lifecycle ablation (Δ success pp against the full patch, paired per task, 95% CI; (n) = tasks)", "",
             "| Ablation | Full patch | " + " | ".join(headers) + " |", "|---" * (len(headers) + 2) + "|"]
    for r in ablation:
        lines.append(f"| {r['method']} | {r['full']} | "
                     + " | ".join(_ci_cell(r.get(b)) for b in (*names(), "average")) + " |")
    return lines


def write_main_csv(path: str, main_rows: list[dict]) -> None:
    """The main table as CSV: one row per method, every column with its n beside it (`<column>_n`)."""
    import csv
    columns = main_columns()
    header = ["method"] + [x for key, _, _ in columns for x in (key, f"{key}_n")]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        for r in main_rows:
            cells = [r["method"]]
            for key, _, n in columns:
                cells += [f"{r[key]:.2f}" if r.get(n) else "", r.get(n, 0)]
            w.writerow(cells)


def _score_legend() -> str:
    """What each score column means (", WebShop score = mean reward × 100")."""
    return "".join(f", {_columns(b).title} score = mean reward × 100" for b in names() if _columns(b).score)


def markdown_tables(result: EvalResult, main_rows, deltas, ablation=(), sources: dict | None = None) -> list[str]:
    """The main, delta and cost tables with their footnotes (also TensorBoard's text summary)."""
    columns = main_columns()
    lines = [f"## Main table (success %{_score_legend()}; (n) = tasks)", "",
             "| Method | " + " | ".join(c[1] for c in columns) + " |",
             "|---" * (len(columns) + 1) + "|"]
    for r in main_rows:
        lines.append(f"| {r['method']} | " + " | ".join(
            f"{_fmt(r.get(k))} ({r[n]})" if r.get(n) else "–" for k, _, n in columns) + " |")
    lines += [""] + footnotes(result, main_rows, sources) + [""]
    lines += ["## Paired deltas per benchmark (pp, 95% paired bootstrap CI; n.s. = interval crosses 0)", "",
              "| Method | Benchmark | n | Δ reward [CI] | Δ pass rate | rescued | regressed | seeds |",
              "|---|---|---|---|---|---|---|---|"]
    for d in deltas:
        lines.append(f"| {d['method']} | {_columns(d['benchmark']).label} | {d['n']} | {_delta_cell(d)} | "
                     f"{100 * d['delta_pass_rate']:+.1f} | {d['rescued']} | {d['regressed']} | {d['seeds']} |")
    lines += ablation_markdown(ablation)
    lines += ["", "## Cost and validity", "",
              "| Method | target episodes | target tokens | engineer tokens | wall s | invalid patches | eval failed |",
              "|---|---|---|---|---|---|---|"]
    for m in result.methods:
        c = m.cost
        lines.append(f"| {display_name(m)} | {c.get('target_episodes', 0)} | {c.get('target_tokens', 0)} | "
                     f"{c.get('engineer_tokens', 0)} | {_fmt(c.get('wall_seconds', 0.0))} | {m.n_invalid} | "
                     f"{m.n_eval_failed} |")
    return lines


def render_markdown(result: EvalResult, main_rows, deltas, provenance: dict, ablation=()) -> str:
    lines = [f"# {result.title}", ""]
    lines += [f"- {k}: {v}" for k, v in _provenance_lines(provenance)] + [""]
    lines += [f"- {n}" for n in result.notes] + [""]
    lines += markdown_tables(result, main_rows, deltas, ablation, provenance.get("data", {}))
    lines += ["", "## Patches", ""]
    for m in result.methods:
        for p in m.patches:
            lines.append(f"### {m.name} · {p.benchmark} · {p.batch} · seed {p.seed} — "
                         f"{'valid' if p.valid else 'INVALID'}")
            if p.reason:
                lines.append(f"_{p.reason}_")
            if p.think:
                lines += ["", "> " + p.think.strip().replace("\n", "\n> ")]
            for action in (p.patch or {}).get("actions", []):
                lines += ["", f"**{action.get('hook')}**", "", "```python", action.get("code", ""), "```"]
            if p.hook_stats:
                lines += ["", "| hook | " + "effects |", "|---|---|"]
                for hook, stats in sorted(p.hook_stats.items()):
                    lines.append(f"| {hook} | " + ", ".join(f"{k}: {v}" for k, v in sorted(stats.items())) + " |")
            lines += ["", f"rescued: {p.rescued or '–'} · broke: {p.regressed or '–'}", ""]
    return "\n".join(lines) + "\n"


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
td{white-space:nowrap}td:first-child{white-space:normal}
td:first-child,th:first-child{text-align:left}th{background:#f4f4f4}.ns{color:#999}
.cnt{color:#888;font-size:80%;margin-left:0.3em}.prov td{text-align:left;white-space:normal}
.foot{font-size:90%;color:#444;margin:0.2em 0}img.plot{display:block;max-width:100%;margin:1em 0}
pre{background:#f8f8f8;padding:8px;overflow-x:auto;font-size:12px}.k{color:#00f}.s{color:#a31515}
.c{color:#008000}.n{color:#098658}details{margin:0.6em 0;border:1px solid #ddd;padding:6px}
.think{white-space:pre-wrap;background:#fffbe6;padding:6px}.bad{color:#c00}
"""


def _html_main_table(result: EvalResult, main_rows, sources: dict | None = None) -> list[str]:
    e = html.escape
    columns = main_columns()
    parts = [f"<h2>Main table</h2><p class='foot'>success %{_score_legend()}; "
             "the small grey number is n, the tasks behind the cell</p><table id='main-table'><tr><th>Method</th>"
             + "".join(f"<th>{e(c[1])}</th>" for c in columns) + "</tr>"]
    for r in main_rows:
        cells = "".join(f"<td>{_fmt(r.get(k))}<span class='cnt'>{r[n]}</span></td>" if r.get(n) else "<td>–</td>"
                        for k, _, n in columns)
        parts.append(f"<tr><td>{e(r['method'])}</td>{cells}</tr>")
    parts.append("</table>" + "".join(f"<p class='foot'>{e(n)}</p>" for n in footnotes(result, main_rows, sources)))
    return parts


def _html_deltas(deltas) -> list[str]:
    e = html.escape
    parts = ["<h2>Paired deltas</h2><p class='foot'>pp, 95% paired bootstrap CI over tasks; grey = the "
             "interval crosses 0 (n.s.)</p><table id='delta-table'><tr><th>Method</th><th>Benchmark</th>"
             "<th>n</th><th>Δ reward pp [95% CI]</th><th>Δ pass pp</th><th>rescued</th><th>regressed</th>"
             "<th>seeds</th></tr>"]
    for d in deltas:
        cls = "" if d["significant"] else " class='ns'"
        parts.append(f"<tr{cls}><td>{e(d['method'])}</td><td>{e(_columns(d['benchmark']).label)}</td><td>{d['n']}</td>"
                     f"<td>{e(_delta_cell(d))}</td><td>{100 * d['delta_pass_rate']:+.1f}</td><td>{d['rescued']}</td>"
                     f"<td>{d['regressed']}</td><td>{d['seeds']}</td></tr>")
    parts.append("</table>")
    if deltas:
        parts.append(f"<h2>Plots</h2><img class='plot' alt='deltas' src='data:image/png;base64,{plot_deltas(deltas)}'>"
                     f"<img class='plot' alt='rescued vs regressed' "
                     f"src='data:image/png;base64,{plot_rescued_regressed(deltas)}'>")
    return parts


def _html_costs(result: EvalResult) -> list[str]:
    e = html.escape
    parts = ["<h2>Cost and validity</h2><table><tr><th>Method</th><th>target episodes</th><th>target tokens</th>"
             "<th>engineer tokens</th><th>wall s</th><th>invalid patches</th><th>eval failed</th></tr>"]
    for m in result.methods:
        c = m.cost
        parts.append(f"<tr><td>{e(display_name(m))}</td><td>{c.get('target_episodes', 0)}</td>"
                     f"<td>{c.get('target_tokens', 0)}</td><td>{c.get('engineer_tokens', 0)}</td>"
                     f"<td>{_fmt(c.get('wall_seconds', 0.0))}</td><td>{m.n_invalid}</td><td>{m.n_eval_failed}</td></tr>")
    parts.append("</table>")
    return parts


def _html_patches(result: EvalResult) -> list[str]:
    e = html.escape
    parts = ["<h2>Patches</h2>"]
    for m in result.methods:
        for p in m.patches:
            status = "valid" if p.valid else "<span class='bad'>INVALID</span>"
            parts.append(f"<details><summary>{e(m.name)} · {e(p.benchmark)} · {e(p.batch)} · seed {p.seed} — {status}"
                         f" · rescued {len(p.rescued)} / broke {len(p.regressed)}</summary>")
            if p.reason:
                parts.append(f"<p><i>{e(p.reason)}</i></p>")
            if p.think:
                parts.append(f"<div class='think'>{e(p.think.strip())}</div>")
            if p.patch and p.patch.get("description"):
                parts.append(f"<p>{e(p.patch['description'])}</p>")
            for action in (p.patch or {}).get("actions", []):
                parts.append(f"<h4>{e(str(action.get('hook')))}</h4><pre>{highlight_python(action.get('code', ''))}</pre>")
            if p.hook_stats:
                parts.append("<table><tr><th>hook</th><th>effects</th></tr>")
                for hook, stats in sorted(p.hook_stats.items()):
                    parts.append(f"<tr><td>{e(hook)}</td><td>"
                                 + e(", ".join(f"{k}: {v}" for k, v in sorted(stats.items()))) + "</td></tr>")
                parts.append("</table>")
            parts.append(f"<p>rescued tasks: {e(str(p.rescued or '–'))}; broke: {e(str(p.regressed or '–'))}</p></details>")
    return parts


def _html_ablation(ablation) -> list[str]:
    if not ablation:
        return []
    e = html.escape
    parts = ["<h2>Lifecycle ablation</h2><p class='foot'>Δ success pp against the full patch, paired per task, "
             "95% CI; (n) = tasks</p><table id='ablation-table'><tr><th>Ablation</th><th>Full patch</th>"
             + "".join(f"<th>{e(h)}</th>" for h in _ablation_headers()) + "</tr>"]
    for r in ablation:
        parts.append(f"<tr><td>{e(r['method'])}</td><td>{e(r['full'])}</td>"
                     + "".join(f"<td>{e(_ci_cell(r.get(b)))}</td>" for b in (*names(), "average")) + "</tr>")
    return parts + ["</table>"]


def render_html(result: EvalResult, main_rows, deltas, provenance: dict, ablation=()) -> str:
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(result.title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{e(result.title)}</h1><table class='prov' id='provenance'>"]
    parts += [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in _provenance_lines(provenance)]
    parts.append("</table><ul>" + "".join(f"<li>{e(n)}</li>" for n in result.notes) + "</ul>")
    parts += (_html_main_table(result, main_rows, provenance.get("data", {})) + _html_deltas(deltas) + _html_ablation(ablation)
              + _html_costs(result) + _html_patches(result))
    parts.append("</body></html>")
    return "".join(parts)


# ----------------------------------------------------------------------------------------------
# TensorBoard and files

def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def write_scalars(result: EvalResult, main_rows, deltas, logdir: str, step: int | dict) -> None:
    """Deltas as scalars `eval/<method>/<benchmark>/...` at the evaluated engineer's training step
    (`step`: one for every method, or {method name: step}), the tables as text."""
    def step_of(name):
        return step.get(name.removesuffix(f" {UPPER_MARK}"), 0) if isinstance(step, dict) else step

    with TensorBoardWriter(logdir) as tb:
        for d in deltas:
            tag = f"eval/{_slug(d['method'])}/{d['benchmark']}"
            tb.scalars(step_of(d["method"]), {f"{tag}/delta_reward_pp": 100 * d["mean_delta"],
                                              f"{tag}/ci_low_pp": 100 * d["ci_low"],
                                              f"{tag}/ci_high_pp": 100 * d["ci_high"],
                                              f"{tag}/delta_pass_pp": 100 * d["delta_pass_rate"]})
        for r in main_rows[1:]:
            tb.scalars(step_of(r["method"]), {f"eval/{_slug(r['method'])}/average_success": r["average"]})
        tb.text(0 if isinstance(step, dict) else step, "eval/report",
                "\n".join(markdown_tables(result, main_rows, deltas)))


def write_reports(result: EvalResult, outdir: str, *, n_boot: int = 2000, seed: int = 0,
                  provenance: dict | None = None, tb_dir: str | None = None, steps: dict | None = None) -> dict:
    """Write report.md, report.html, main_table.csv and report.json (the numbers and the provenance) into `outdir`,
    and the deltas as TensorBoard scalars under `tb_dir` (default `outdir/tensorboard/eval`).

    `provenance` defaults to what `outdir` holds (`provenance.collect`: the stage's config file, the
    DBBench results under outdir/baseline); `steps` ({method name: training step}) defaults to the
    evaluated engineer checkpoint's step for every method."""
    os.makedirs(outdir, exist_ok=True)
    main_rows = main_table_rows(result)
    deltas = delta_rows(result, n_boot=n_boot, seed=seed)
    ablation = ablation_rows(result, n_boot=n_boot, seed=seed)
    benchmarks = [b for b in names() if any(p.benchmark == b for m in result.methods for p in m.pairs)]
    provenance = provenance or prov.collect(outdir, benchmarks)
    paths = {"md": os.path.join(outdir, "report.md"), "html": os.path.join(outdir, "report.html"),
             "json": os.path.join(outdir, "report.json"), "csv": os.path.join(outdir, "main_table.csv")}
    # Reports quote patches and reasons (endpoint text): unencodable code points become "?".
    with open(paths["md"], "w", encoding="utf-8", errors="replace") as f:
        f.write(render_markdown(result, main_rows, deltas, provenance, ablation))
    with open(paths["html"], "w", encoding="utf-8", errors="replace") as f:
        f.write(render_html(result, main_rows, deltas, provenance, ablation))
    write_main_csv(paths["csv"], main_rows)
    write_json(paths["json"], {"main_table": main_rows, "deltas": deltas, "ablation": ablation,
                               "provenance": provenance}, sort_keys=True)
    write_scalars(result, main_rows, deltas, tb_dir or os.path.join(outdir, "tensorboard", "eval"),
                  steps if steps is not None else int(provenance.get("engineer_step") or 0))
    return paths
