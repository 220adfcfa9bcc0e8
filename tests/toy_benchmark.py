"""The tests' counter game (toy_env.py) as a benchmark: its whole plug-in, registered by one line
(`envs.registry.registered("counter", "toy_benchmark:BENCHMARK")`). Tasks alternate between the
families "even" and "odd" (task id parity) so the report's family columns have something to show."""
from envs.plugin import Benchmark, ReportColumns

BENCHMARK = Benchmark(
    name="counter",
    env="toy_env:CounterEnv",
    scripted_agent="toy_env:make_agent",
    test_split="test",
    report=ReportColumns(title="Counter", success="Counter success", ablation="Counter",
                         families=(("even", "Counter even"), ("odd", "Counter odd"))),
    data_source=lambda section, recorded: "Counter: the tests' toy counting game",
    family_of=lambda episode: "odd" if int(episode["task_id"]) % 2 else "even",
)
