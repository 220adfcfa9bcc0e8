"""DBBench's descriptor: AgentBench's SQL tasks, their data named with the SQL backend the results
recorded."""
from __future__ import annotations

from envs.dbbench.patch_spec import PATCH
from envs.plugin import Benchmark, DemoTasks, Packets, ReportColumns


def data_source(section: dict, recorded) -> str:
    """User task files (`dbbench.task_files`) or the shipped ones, on the recorded backends."""
    files = str(section.get("task_files") or "")
    tasks = f"tasks from {files} (else the shipped AgentBench files)" if files else "the AgentBench tasks"
    return f"DBBench: {tasks} on {' + '.join(recorded('backend')) or 'an unrecorded SQL backend'}"


BENCHMARK = Benchmark(
    name="dbbench",
    env="envs.dbbench.env:DBBenchEnv",
    scripted_agent="envs.dbbench.scripted:ScriptedAgent",
    config_section="envs.dbbench.config",
    test_split="test",
    report=ReportColumns(title="DBBench", success="DBBench success", ablation="DBBench"),
    data_source=data_source,
    rank=0,
    teacher_signals="envs.dbbench.teacher_signals:SIGNALS",
    demo=DemoTasks(train_split="dev", train_tasks="0:40", heldout_split="test", heldout_tasks="0:20",
                   val_split="dev"),
    services="envs.dbbench.services:mariadb",
    patch=PATCH,
    packets=Packets(evidence="envs.dbbench.packets:evidence",
                    limits=(("max_failures_per_batch", 4), ("max_messages_per_trace", 22),
                            ("max_tool_result_chars", 1200), ("max_evidence_chars", 26000))),
    shuffle_offset=401,
)
