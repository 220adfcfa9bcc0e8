"""`hr1 patch check` through a real subprocess."""
import json
import os
import subprocess
import sys

from hr1_jax.patch import build_response
from tests.patch.refdata import REF

REPO = REF.parents[2]


def run(*args):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, "-m", "hr1_jax.cli", "patch", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_check_reference_files_and_wrappers(tmp_path):
    demo = json.loads((REF / "demo/artifacts/patch.json").read_text())
    (tmp_path / "wrapped.json").write_text(json.dumps({"id": 3, "patch": demo}))
    (tmp_path / "wrapped_str.json").write_text(json.dumps({"patch": json.dumps(demo)}))
    (tmp_path / "response.txt").write_text(build_response(demo, "prefill_think_patch"))
    (tmp_path / "full.txt").write_text(build_response(demo, "full_think_patch"))
    (tmp_path / "row.json").write_text(json.dumps({"response": build_response(demo, "prefill_think_patch")}))
    files = [str(REF / "examples/webshop_patch.json"), str(REF / "demo/artifacts/patch.json")]
    files += [str(tmp_path / n) for n in ("wrapped.json", "wrapped_str.json", "response.txt", "full.txt", "row.json")]
    r = run("check", *files)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(": valid (webshop") == len(files)


def test_check_reports_invalid_and_exit_code(tmp_path):
    bad = {"benchmark": "webshop", "description": "x", "actions": [
        {"type": "add_code_hook", "hook": "make_pre_hint", "code": "def hook(ctx, nb):\n    import os\n    return None"}]}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    (tmp_path / "garbage.txt").write_text("I could not find any failure.")
    good = str(REF / "examples/webshop_patch.json")
    r = run("check", good, str(tmp_path / "bad.json"), str(tmp_path / "garbage.txt"),
            str(REF / "examples/heldout_generalization/results.json"), str(tmp_path / "missing.json"), "--json")
    assert r.returncode == 1
    reports = json.loads(r.stdout)
    assert [x["valid"] for x in reports] == [True, False, False, False, False]
    assert [x["error_code"] for x in reports[1:]] == ["forbidden_syntax", "missing_think", "no_patch", "unreadable"]
    assert reports[0]["hooks"] == ["on_init", "make_pre_hint"]


def test_check_benchmark_mismatch_and_flags(tmp_path):
    r = run("check", str(REF / "examples/webshop_patch.json"), "--benchmark", "dbbench")
    assert r.returncode == 1 and "benchmark_mismatch" in r.stdout
    alf = str(REF / "examples/heldout_generalization/harness-r1/seed20260721/alfworld.json")  # 9331 code chars
    assert run("check", alf).returncode == 0
    r = run("check", alf, "--max-total-code-chars", "9000")
    assert r.returncode == 1 and "code_budget" in r.stdout
    assert run("check").returncode == 2


def test_broken_json_is_reported_as_broken_json_not_as_a_response(tmp_path):
    (tmp_path / "broken.json").write_text('{"benchmark": "webshop", "actions": [')
    r = run("check", str(tmp_path / "broken.json"), "--hook-once")   # the kebab spelling still works
    assert r.returncode == 1 and "invalid: bad_json: file opens a JSON object but is not valid JSON" in r.stdout
