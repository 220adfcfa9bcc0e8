"""The template teacher's evidence and the demo's task sets come from the benchmark descriptors: a
benchmark registered with its own trace detectors and demo defaults is detected and configured
with no training code naming it."""
import dataclasses
import re


import toy_benchmark
from envs import registry
from envs.plugin import DemoTasks, TeacherSignals, call_args
from hr1_jax.rollout.prompts import EVIDENCE_MARKER
from hr1_jax.train import config as train_config
from hr1_jax.train.teacher import programs
from hr1_jax.train.teacher.signals import detect

_ADD = re.compile(r"^ASSISTANT_TOOL: add (.*)$", re.M)


def _overshoot(trace: str) -> set[str]:
    adds = [int(call_args(raw).get("n", 0)) for raw in _ADD.findall(trace)]
    return {"overshoot"} if sum(adds) > 3 else set()


SIGNALS = TeacherSignals(trace_start=re.compile(r"^## Trace", re.M), detect=_overshoot)
COUNTER = dataclasses.replace(toy_benchmark.BENCHMARK, rank=1, teacher_signals="test_teacher_signals:SIGNALS",
                              demo=DemoTasks(train_split="train", train_tasks="0:4", heldout_split="test",
                                             heldout_tasks="0:2", val_split="train", notes=("counter note",)))
PACKET = ("ignored preamble\n" + EVIDENCE_MARKER + "\n## Trace 1\nASSISTANT_TOOL: add {\"n\": 5}\n"
          "## Trace 2\nASSISTANT_TOOL: add {\"n\": 1}\nASSISTANT_TOOL: add not-json\n"
          "## Trace 3\nASSISTANT_TOOL: add {\"n\": 2}\nASSISTANT_TOOL: add {\"n\": 2}\n")


def test_detectors_are_the_descriptors():
    with registry.registered("counter", "test_teacher_signals:COUNTER"):
        assert detect("counter", PACKET) == {"overshoot": 2}
        row = {"prompt": [{"role": "user", "content": PACKET}]}
        assert detect("counter", row) == {"overshoot": 2}
    with registry.registered("counter", "toy_benchmark:BENCHMARK"):
        assert detect("counter", PACKET) == {}       # no detectors declared: nothing evidenced


def test_shipped_detectors_split_traces_and_count_per_trace():
    packet = (EVIDENCE_MARKER + "\n### Trace case 1\nASSISTANT_TOOL: click_action {\"button\": \"Buy Now\"}\n"
              "### Trace case 2\nrepeated_search_terms: shoes x3\n### Trace case 3\nASSISTANT_TOOL: click_action "
              "{\"button\": \"buy now\"}\nfinal_reward: 0.25\n")
    assert detect("webshop", packet) == {"options_before_buy": 2, "careful_pick": 1, "search_loop": 1}


def test_training_order_drives_the_demo_and_the_teacher_library():
    assert registry.training_order() == ("dbbench", "alfworld", "webshop")
    assert programs.BENCHMARKS == registry.training_order()
    with registry.registered("counter", "test_teacher_signals:COUNTER"):
        # ranked 1 like alfworld: the tie keeps the registry order (extra registrations come last)
        assert registry.training_order() == ("dbbench", "alfworld", "counter", "webshop")
        demo = train_config.defaults().demo
        assert demo.benchmarks == ("dbbench", "alfworld", "counter", "webshop")
        assert (demo.counter.train_tasks, demo.counter.heldout_split, demo.counter.batch_size) == ("0:4", "test", 5)
        assert programs.BENCHMARKS == ("dbbench", "alfworld", "webshop")   # it has no program module
    with registry.registered("counter", "toy_benchmark:BENCHMARK"):   # no demo defaults: not in the demo
        demo = train_config.defaults().demo
        assert demo.benchmarks == ("dbbench", "alfworld", "webshop") and "counter" not in demo


def test_demo_defaults_come_from_the_descriptors():
    demo = train_config.defaults().demo
    for name in demo.benchmarks:
        want = registry.benchmark(name).demo
        assert {f: demo[name][f] for f in train_config.DEMO_TASK_FIELDS} == {
            f: getattr(want, f) for f in train_config.DEMO_TASK_FIELDS}
    assert (demo.dbbench.train_split, demo.dbbench.train_tasks, demo.alfworld.heldout_split) == ("dev", "0:40", "dev")
