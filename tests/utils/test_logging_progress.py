"""Event lines (human by default, exact JSON on request) and plain progress lines without a terminal."""
import io
import json
import re

from hr1_jax.utils.logging import format_human, log_event
from hr1_jax.utils.progress import PlainProgress, map_in_chunks, progress

GRPO_STEP = {"reward/mean": 0.12345, "reward/valid_patch_rate": 0.75, "train/loss": 0.000123, "train/lr": 1e-4,
             "perf/step_s": 1.26, "perf/sample_tokens_per_s": 5188.3, "train/clipfrac_high": 0.0}


def test_grpo_step_line_shows_the_few_numbers_that_matter():
    line = format_human("grpo", "step", step=3, num_steps=48, **GRPO_STEP)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d grpo step 3/48 reward=\+0\.123 valid=0\.75 "
                        r"loss=0\.000123 lr=1\.0e-04 s=1\.3", line), line
    assert " loss=0 " in format_human("grpo", "step", step=1, **dict(GRPO_STEP, **{"train/loss": -0.0}))


def test_other_events_show_name_bare_and_fields_short():
    line = format_human("demo", "stage_done", name="grpo", seconds=69.94, mesh={"data": 1}, reason="x" * 1000)
    assert " demo stage_done grpo seconds=69.94 mesh={\"data\":1} reason=" in line
    assert len(line) < 400 and line.endswith("…")
    assert format_human("sft", "tokenizer", prompt_end="<|im_start|>assistant\n<think>\n").endswith(
        'prompt_end="<|im_start|>assistant\\n<think>\\n"')


def test_default_is_human_and_json_is_exact_when_asked(monkeypatch, capsys):
    monkeypatch.delenv("HR1_LOG_FORMAT", raising=False)
    log_event("grpo", "step", step=3, num_steps=48, **GRPO_STEP)
    human = capsys.readouterr().err
    assert not human.startswith("HR1 ") and "reward=+0.123" in human
    monkeypatch.setenv("HR1_LOG_FORMAT", "json")
    log_event("grpo", "step", step=3, num_steps=48, **GRPO_STEP)
    line = capsys.readouterr().err
    assert line.startswith("HR1 ") and line.endswith("\n")
    payload = json.loads(line[4:])
    assert payload.pop("stage") == "grpo" and payload.pop("event") == "step" and payload.pop("ts") > 0
    assert payload == {"step": 3, "num_steps": 48, **GRPO_STEP}


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_plain_progress_prints_every_tenth_with_the_current_numbers_and_the_end():
    out, clock = io.StringIO(), FakeClock()
    bar = PlainProgress(total=20, desc="sft", unit="step", every_s=1e9, clock=clock, stream=out)
    for i in range(20):
        clock.t += 1.0
        bar.update(1)
        bar.set_postfix(loss=f"{i}")
    bar.close()
    lines = out.getvalue().splitlines()
    assert [re.search(r"sft: (\d+)/20", x).group(1) for x in lines] == [str(n) for n in range(2, 21, 2)]
    assert lines[0].endswith("2/20 step (10%) 2 s, ~18 s left loss=1")   # loss of step 2, not step 1
    assert lines[-1].endswith("20/20 step (100%) 20 s, ~0 s left loss=19")


def test_plain_progress_prints_on_time_when_the_total_moves_slowly():
    out, clock = io.StringIO(), FakeClock()
    bar = PlainProgress(total=1000, desc="eval", every_s=30.0, clock=clock, stream=out)
    for _ in range(5):
        clock.t += 31.0
        bar.update(1)
    assert len(out.getvalue().splitlines()) == 5
    bar.close()   # nothing new since the last line
    assert len(out.getvalue().splitlines()) == 5


def test_progress_without_a_terminal_is_plain_lines_and_off_when_asked(monkeypatch):
    monkeypatch.delenv("HR1_PROGRESS", raising=False)
    monkeypatch.setattr("sys.stderr", io.StringIO())   # not a terminal
    assert isinstance(progress(total=3, desc="x"), PlainProgress)
    monkeypatch.setenv("HR1_PROGRESS", "0")
    assert progress(total=3, desc="x").disable


def test_fast_work_prints_nothing():
    out, clock = io.StringIO(), FakeClock()
    bar = PlainProgress(total=10, desc="rows", clock=clock, stream=out)
    for _ in range(10):
        clock.t += 0.01
        bar.update(1)
    bar.close()
    assert out.getvalue() == ""


def test_map_in_chunks_keeps_order_and_calls_per_chunk(monkeypatch):
    monkeypatch.setenv("HR1_PROGRESS", "0")
    calls = []

    def double(part):
        calls.append(len(part))
        return [2 * x for x in part]

    assert map_in_chunks(double, list(range(7)), chunk=3, desc="x") == [0, 2, 4, 6, 8, 10, 12]
    assert calls == [3, 3, 1]


def test_map_in_chunks_with_chunks_in_flight_returns_items_in_order(monkeypatch):
    import threading
    import time

    monkeypatch.setenv("HR1_PROGRESS", "0")
    both_running = threading.Barrier(2, timeout=10)   # fails unless two chunks run at the same time

    def slow_first(part):
        if part[0] < 4:
            both_running.wait()
        time.sleep(0.05 if part[0] == 0 else 0)
        return [x * 10 for x in part]

    assert map_in_chunks(slow_first, list(range(6)), chunk=2, desc="x", in_flight=2) == [0, 10, 20, 30, 40, 50]
