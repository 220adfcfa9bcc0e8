import json
import os
import re
import shutil
import subprocess

import pytest

from hr1_jax.eval import provenance
from hr1_jax.eval.report import highlight_python, write_reports
from hr1_jax.eval.results import EvalResult, MethodResult, PatchRecord, TaskPair
from hr1_jax.utils.tensorboard import read_events

PROVENANCE = {"commit": "abc123def456", "config": "config.eval.json sha256:0123456789abcdef",
              "date": "2026-01-05T10:11:12+00:00", "target": "scripted scripted-v1", "engineer": "",
              "engineer_step": None, "data": {"alfworld": "ALFWorld: real games", "webshop": "WebShop SUBSTITUTE: x"}}


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
    best = MethodResult(name="Best-of-2 target", upper_reference=True, description="best attempt by the env's signal",
                        pairs=pairs("alfworld", base_alf, [1, 1, 0, 0, 1, 0, 1, 0, 0, 0]))
    heldout = MethodResult(name="GRPO held-out", pairs=pairs("alfworld", base_alf[3:], [1] * 7)[:7])
    return EvalResult(title="Test evaluation", methods=[grpo, noisy, best, heldout], notes=["scripted target"])


def test_reports_have_tables_intervals_and_patch_views(tmp_path):
    paths = write_reports(_result(), str(tmp_path), n_boot=500, provenance=PROVENANCE)
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


def test_reports_carry_provenance_one_mark_per_meaning_and_n_per_cell(tmp_path):
    paths = write_reports(_result(), str(tmp_path), n_boot=200, provenance=PROVENANCE)
    md, page = open(paths["md"]).read(), open(paths["html"]).read()
    for line in ("- commit: abc123def456", "- config: config.eval.json sha256:0123456789abcdef",
                 "- date: 2026-01-05T10:11:12+00:00", "- target: scripted scripted-v1", "- data: WebShop SUBSTITUTE: x"):
        assert line in md
    assert "id='provenance'" in page and "abc123def456" in page
    # † only on the upper reference, ‡ only on the WebShop columns, each explained once
    assert "| Best-of-2 target † |" in md and "| GRPO engineer |" in md and "WebShop score‡" in md
    assert md.count("† upper reference") == 1 and md.count("‡ WebShop is") == 1
    # n per cell; the held-out row on 7 of the baseline's 10 ALFWorld tasks says so
    assert "| No patch (baseline) | – | – | – | – | – | – | 30.0 (10) |" in md
    assert "| GRPO held-out | – | – | – | – | – | – | 100.0 (7) |" in md
    assert "Fewer tasks than the baseline row: GRPO held-out" in md
    assert json.load(open(paths["json"]))["provenance"] == PROVENANCE


def test_report_deltas_go_to_tensorboard_at_the_given_training_steps(tmp_path):
    write_reports(_result(), str(tmp_path), n_boot=200, provenance=PROVENANCE,
                  steps={"GRPO engineer": 48, "Best-of-2 target": 0})
    ev = read_events(str(tmp_path / "tensorboard" / "eval"))
    assert [s for s, _ in ev["eval/grpo_engineer/alfworld/delta_reward_pp"]] == [48]
    assert ev["eval/grpo_engineer/alfworld/delta_reward_pp"][0][1] == pytest.approx(40.0)
    assert [s for s, _ in ev["eval/best_of_2_target/alfworld/delta_reward_pp"]] == [0]
    assert "Main table" in ev["eval/report"][0][1]


def test_provenance_reads_the_stage_config_recorded_backends_and_checkpoint_step(tmp_path):
    engineer = tmp_path / "grpo"
    (engineer / "checkpoints" / "12").mkdir(parents=True)
    (engineer / "checkpoints" / "8").mkdir()
    config = {"target": {"kind": "scripted", "name": "scripted-v1"}, "eval": {"engineer": str(engineer)}}
    (tmp_path / "config.eval.json").write_text(json.dumps(config))
    batch = tmp_path / "baseline" / "seed0" / "dbbench" / "batch_000"
    batch.mkdir(parents=True)
    (batch / "results.jsonl").write_text(json.dumps({"final": {"backend": "mariadb"}}) + "\n")
    p = provenance.collect(str(tmp_path), ["dbbench", "webshop"])
    assert p["config"] == f"config.eval.json sha256:{provenance.config_sha256(config)}"
    assert p["target"] == "scripted scripted-v1" and p["engineer_step"] == 12
    assert p["data"]["dbbench"].endswith("on mariadb") and p["data"]["webshop"].startswith("WebShop SUBSTITUTE")
    assert provenance.config_sha256({"b": 1, "a": {"y": 2, "x": 1}}) == provenance.config_sha256({"a": {"x": 1, "y": 2}, "b": 1})
    assert re.match(r"[0-9a-f]{12}( \+ uncommitted changes)?$", p["commit"]), p["commit"]


def test_highlighter_escapes_and_marks_tokens():
    out = highlight_python("def hook(ctx, nb):\n    return {'a': '<b>'}  # c\n")
    assert '<span class="k">def</span>' in out and "&lt;b&gt;" in out and '<span class="c"># c</span>' in out
    assert highlight_python("'''<x>") == "&#x27;&#x27;&#x27;&lt;x&gt;"  # tokenize error: escaped text


def render_probe(html_path, tmp_path) -> tuple[int, int, int]:
    """Open a report in headless Chromium at 1280 px: (#rows of the main table, #images, #images
    decoded and shown at >= 90% of their own width, so the plots' labels are not shrunk)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    probe = tmp_path / "probe.html"
    probe.write_text(open(html_path).read().replace("</body>", (
        "<script>window.addEventListener('load',()=>{const imgs=[...document.images];"
        "document.body.setAttribute('data-probe',"
        "(document.querySelectorAll('#main-table tr').length)+':'+imgs.length+':'"
        "+imgs.filter(i=>i.complete&&i.naturalWidth>100&&i.width>=0.9*i.naturalWidth).length)});"
        "</script></body>")))
    out = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2000", "--virtual-time-budget=5000",
         "--dump-dom",
         probe.as_uri()], capture_output=True, text=True, timeout=120)
    match = re.search(r'data-probe="(\d+):(\d+):(\d+)"', out.stdout)
    assert match, out.stderr[-2000:]
    return tuple(int(x) for x in match.groups())


@pytest.mark.chromium
def test_report_renders_in_headless_chromium(tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium is not installed (launch/setup.sh installs it as root)")
    paths = write_reports(_result(), str(tmp_path), n_boot=200, provenance=PROVENANCE)
    # The tables exist (header + baseline + 4 methods) and every plot decoded, unshrunk.
    assert render_probe(paths["html"], tmp_path) == (6, 2, 2)
    shot = tmp_path / "shot.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile2'}", f"--screenshot={shot}", "--window-size=1280,2000",
                    paths["html"]],
                   capture_output=True, timeout=120)
    assert shot.exists() and os.path.getsize(shot) > 10_000
