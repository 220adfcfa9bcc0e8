import json
import os
import re
import shutil
import subprocess

import pytest

from hr1_jax.eval.report import highlight_python, write_reports
from hr1_jax.eval.results import EvalResult, MethodResult, PatchRecord, TaskPair


def _result() -> EvalResult:
    def pairs(bench, base, patched, seed=0):
        return [TaskPair(bench, i, seed, "b000", b, p) for i, (b, p) in enumerate(zip(base, patched))]

    base_alf = [0, 1, 0, 0, 1, 0, 1, 0, 0, 0]
    grpo = MethodResult(
        name="GRPO engineer",
        pairs=pairs("alfworld", base_alf, [1, 1, 1, 0, 1, 1, 1, 0, 1, 0])
        + pairs("webshop", [0.5, 1.0, 0.2], [0.75, 1.0, 0.2]),
        patches=[PatchRecord(method="GRPO engineer", benchmark="alfworld", batch="b000", seed=0, valid=True,
                             think="- loops on take\n- stage in nb", patch={
                                 "benchmark": "alfworld", "description": "stage machine",
                                 "actions": [{"type": "add_code_hook", "hook": "make_pre_hint",
                                              "code": "def hook(ctx, nb):\n    # why\n    return {'message': 'x'}\n"}]},
                             hook_stats={"make_pre_hint": {"message": 12, "none": 30}}, rescued=[0, 2, 5, 8])],
        cost={"target_episodes": 26, "wall_seconds": 3.5}, n_invalid=1)
    noisy = MethodResult(name="Self-Refine rule", pairs=pairs("alfworld", base_alf, [1, 0, 0, 0, 1, 0, 1, 0, 0, 1]))
    return EvalResult(title="Test evaluation", methods=[grpo, noisy], notes=["scripted target"])


def test_reports_have_tables_intervals_and_patch_views(tmp_path):
    paths = write_reports(_result(), str(tmp_path), n_boot=500)
    md = open(paths["md"]).read()
    numbers = json.load(open(paths["json"]))
    main = {r["method"]: r for r in numbers["main_table"]}
    assert main["No patch (baseline)"]["alfworld_success"] == pytest.approx(30.0)
    assert main["GRPO engineer"]["alfworld_success"] == pytest.approx(70.0)
    assert main["GRPO engineer"]["webshop_score"] == pytest.approx(100 * (0.75 + 1.0 + 0.2) / 3)
    grpo_alf = next(d for d in numbers["deltas"] if d["method"] == "GRPO engineer" and d["benchmark"] == "alfworld")
    assert (grpo_alf["rescued"], grpo_alf["regressed"]) == (4, 0)
    refine = next(d for d in numbers["deltas"] if d["method"] == "Self-Refine rule")
    assert not refine["significant"] and "(n.s.)" in md  # +1 -1 on 10 tasks is noise
    assert "```python" in md and "make_pre_hint" in md and "substitute" in md
    page = open(paths["html"]).read()
    assert page.count("data:image/png;base64,") == 2 and "<details>" in page


def test_highlighter_escapes_and_marks_tokens():
    out = highlight_python("def hook(ctx, nb):\n    return {'a': '<b>'}  # c\n")
    assert '<span class="k">def</span>' in out and "&lt;b&gt;" in out and '<span class="c"># c</span>' in out
    assert highlight_python("'''<x>") == "&#x27;&#x27;&#x27;&lt;x&gt;"  # tokenize error: escaped text


def render_probe(html_path, tmp_path) -> tuple[int, int, int]:
    """Open a report in headless Chromium: (#rows of the main table, #images, #images decoded)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    probe = tmp_path / "probe.html"
    probe.write_text(open(html_path).read().replace("</body>", (
        "<script>window.addEventListener('load',()=>{const imgs=[...document.images];"
        "document.body.setAttribute('data-probe',"
        "(document.querySelectorAll('#main-table tr').length)+':'+imgs.length+':'"
        "+imgs.filter(i=>i.complete&&i.naturalWidth>100).length)});</script></body>")))
    out = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
         probe.as_uri()], capture_output=True, text=True, timeout=120)
    match = re.search(r'data-probe="(\d+):(\d+):(\d+)"', out.stdout)
    assert match, out.stderr[-2000:]
    return tuple(int(x) for x in match.groups())


@pytest.mark.chromium
def test_report_renders_in_headless_chromium(tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium is not installed (launch/setup.sh installs it as root)")
    paths = write_reports(_result(), str(tmp_path), n_boot=200)
    # The tables exist (header + baseline + 2 methods) and every plot decoded to a real image.
    assert render_probe(paths["html"], tmp_path) == (4, 2, 2)
    shot = tmp_path / "shot.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking", f"--user-data-dir={tmp_path / 'profile2'}",
                    f"--screenshot={shot}", "--window-size=1100,1400", paths["html"]],
                   capture_output=True, timeout=120)
    assert shot.exists() and os.path.getsize(shot) > 10_000
