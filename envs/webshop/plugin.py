"""WebShop's descriptor: the project's substitute environment (or, with `webshop.data_dir`, the real
product and goal files), reported as mean score and success; its columns carry the footnote mark
whose note names the data."""
from __future__ import annotations

from envs.plugin import Benchmark, DemoTasks, Packets, ReportColumns
from envs.webshop.patch_spec import PATCH

MARK = "‡"
REAL = "WebShop REAL data"   # webshop.data_dir: the real product and goal files
SUBSTITUTE_NOTE = ("WebShop SUBSTITUTE: a self-contained synthetic catalog with the real instruction texts, "
                   "page layout and reward formula; not the original WebShop product data.")


def data_source(section: dict, recorded) -> str:
    data_dir = section.get("data_dir") or ""
    return f"{REAL} from {data_dir} (items_shuffle, items_ins_v2, items_human_ins)" if data_dir else SUBSTITUTE_NOTE


def footnote(source: str) -> str:
    if source.startswith(REAL):
        return f"{MARK} {source}."
    return (f"{MARK} WebShop is the project's self-contained substitute environment "
            "(synthetic catalog, real instructions), not the original WebShop.")


BENCHMARK = Benchmark(
    name="webshop",
    env="envs.webshop.env:WebShopEnv",
    scripted_agent="envs.webshop.scripted:ScriptedAgent",
    config_section="envs.webshop.config",
    test_split="test",
    report=ReportColumns(title="WebShop", success=f"WebShop success{MARK}", ablation=f"WebShop success{MARK}",
                         score=f"WebShop score{MARK}", mark=MARK, footnote=footnote),
    data_source=data_source,
    rank=2,
    teacher_signals="envs.webshop.teacher_signals:SIGNALS",
    demo=DemoTasks(train_split="train", train_tasks="0:20", heldout_split="test", heldout_tasks="0:10",
                   val_split="train",
                   notes=("WebShop is the project's substitute environment, not the original WebShop.",)),
    patch=PATCH,
    packets=Packets(title="WebShop", signals="envs.webshop.packets:runtime_signals"),
    summary_note=SUBSTITUTE_NOTE,
    shuffle_offset=211,
)
