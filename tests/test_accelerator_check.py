"""benchmarks/accelerator_check.sh end to end at its tiny CPU size (jax part, torch part, report), and
the memory-based choice of the model for real chips."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import accelerator_check as check  # noqa: E402

GIB = 2 ** 30


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("accelerator_check")
    # One plain CPU device, as on a machine without an accelerator (not the suite's 8 simulated ones).
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "", "OUT_DIR": str(out)}
    proc = subprocess.run(["bash", "benchmarks/accelerator_check.sh"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    theirs = out / "torch.json"
    return (json.loads((out / "jax.json").read_text()), json.loads(theirs.read_text()) if theirs.exists() else None,
            (out / "report.txt").read_text())


def test_tiny_run_measures_train_and_both_decode_batches(tiny_run):
    ours, _, _ = tiny_run
    assert ours["tiny"] and ours["platform"] == "cpu" and ours["scan_layers"]
    assert ours["train"]["loss_finite"] and ours["train"]["tokens_per_s"] > 0 and 0 < ours["train"]["mfu"]
    # The CPU is in no peak table: MFU is against a measured bf16 matmul, and the record says so.
    assert ours["peak_source"].startswith("measured bf16 matmul") and ours["peak_tflops"] > 0
    assert [d["batch"] for d in ours["decode"]] == list(check.TINY_SHAPES["decode_batches"])
    assert all(d.get("all_rows_full_length") and d["tokens_per_s"] > 0 for d in ours["decode"]), ours["decode"]


def test_tiny_run_compares_the_library_attention_with_the_blocked_path(tiny_run):
    ours, _, text = tiny_run
    att = ours["attention"]
    # On a CPU `attention_impl=auto` stays blocked, so the check runs XLA's reference kernel through
    # the same library call a GPU sends to cuDNN.
    assert att["library"] == "xla" and att["blocked_ms"] > 0 and att["library_ms"] > 0
    assert att["rows"] == [check.TINY_SHAPES["train_batch"], check.TINY_SHAPES["seq"]]
    assert att["lengths"][0] == att["rows"][1] > att["lengths"][-1]      # right-padded rows of several lengths
    # bf16 rounds each kernel's output and probabilities once: two correct kernels differ by ~4 * 2^-8.
    assert att["max_rel_diff_out"] <= 4 * 2 ** -8 and att["max_rel_diff_grad"] <= 4 * 2 ** -8
    assert f"attention [{att['rows'][0]} x {att['rows'][1]}] fwd+bwd  blocked" in text


def test_tiny_run_compares_with_torch_when_it_is_installed(tiny_run):
    _, theirs, text = tiny_run
    if importlib.util.find_spec("torch") is None:
        assert theirs == {"skipped": check.torch_unavailable("cpu")} and "torch: skipped - " in text
        return
    assert theirs["train"]["tokens_per_s"] > 0
    assert [d["batch"] for d in theirs["decode"]] == list(check.TINY_SHAPES["decode_batches"])
    assert all(d["all_rows_full_length"] for d in theirs["decode"])
    assert text.count("ours/torch") == 3  # train + two decode batches


def test_report_ends_with_one_json_line_of_both_parts(tiny_run):
    ours, theirs, text = tiny_run
    last = text.strip().splitlines()[-1]
    assert last.startswith("ACCELERATOR_CHECK ")
    assert json.loads(last.removeprefix("ACCELERATOR_CHECK ")) == {"ours": ours, "torch": theirs}


def test_report_says_why_torch_was_skipped(tiny_run, capsys):
    check.report(tiny_run[0], {"skipped": "torch is not installed"})
    assert "torch: skipped - torch is not installed" in capsys.readouterr().out


def test_torch_is_skipped_on_tpu_with_a_reason():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch not installed: the reason is then the missing torch")
    assert check.torch_unavailable("tpu") == "no torch comparison on tpu"


@pytest.mark.parametrize("limit_bytes, param_dtype, expected", [
    (0.92 * 141e9, "bfloat16", "9b"),   # H200 at the check's 92% memory fraction: bf16 params and moments
    (0.92 * 80e9, "bfloat16", "4b"),    # H100 80 GB
    (0.92 * 141e9, "float32", "4b"),    # fp32 master weights: the 9B's train state alone is ~145 GB
    (40 * GIB, "bfloat16", "4b_16l"),
])
def test_largest_model_whose_train_step_fits_is_tried_first(limit_bytes, param_dtype, expected):
    names = check.candidates_to_try(None, limit_bytes, check.FULL_SHAPES, param_dtype)
    assert names == list(check.CANDIDATES)[list(check.CANDIDATES).index(expected):]


def test_when_nothing_fits_only_the_smallest_shape_is_tried():
    assert check.candidates_to_try(None, 10 * GIB, check.FULL_SHAPES, "bfloat16") == ["4b_8l"]


def test_unknown_memory_tries_every_shape_and_model_flag_forces_one():
    assert check.candidates_to_try(None, None, check.FULL_SHAPES, "bfloat16") == list(check.CANDIDATES)
    assert check.candidates_to_try("4b", 10 * GIB, check.FULL_SHAPES, "bfloat16") == ["4b"]
