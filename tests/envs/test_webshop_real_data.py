"""WebShop real-data mode on a fixture in the real file formats (tests/fixtures/webshop_real):
goals and records as upstream builds them, the same site and reward, other task identities, and
reports that name the data source."""
import os

import pytest

from envs.base import Action
from envs.webshop.config import defaults, validate
from envs.webshop.env import WebShopEnv
from envs.webshop.real_data import RealCatalog, price_of
from hr1_jax.config import ConfigError

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "webshop_real")


def _env():
    section = defaults()
    section.data_dir = FIXTURE
    return WebShopEnv(section)


def _act(env, verb, arg):
    tool = "search_action" if verb == "search" else "click_action"
    key = "keywords" if verb == "search" else "value"
    return env.step(Action(tool=tool, arguments={key: arg}, text=f"{verb}[{arg}]"))


def test_goals_and_records_follow_the_real_files():
    cat = RealCatalog(FIXTURE, 233)
    # 4 human instructions with options (the mouse's lacks instruction_options: skipped, as upstream)
    assert len(cat) == 5 and len(cat.goals) == 4
    assert sorted(g.asin for g in cat.goals) == ["B01N5PK0CZ", "B08C4KWM9T", "B08C4KWM9T", "B09QKP7XQL"]
    hair = next(g for g in cat.goals if g.asin == "B09QKP7XQL")
    assert hair.goal_options == {"size": "8 ounce", "scent": "unscented"}
    assert hair.attributes == ("long lasting", "natural ingredients") and hair.query == "hair styling products"
    assert hair.price_upper in (20.0, 30.0, 40.0, 50.0) and hair.price_upper > 12.99
    assert hair.instruction_text.endswith(f", and price lower than {hair.price_upper:.2f} dollars")
    rec = cat.by_asin("b09qkp7xql")
    assert rec["Attributes"] == ["long lasting", "natural ingredients", "hair styling"]
    assert rec["options"] == {"size": ["4 ounce", "8 ounce"], "scent": ["coconut", "unscented"]}
    assert cat.by_asin("B0725KRVVM")["Price"] == 100.0 and cat.by_asin("B0725KRVVM")["options"] == {}
    assert 8.49 <= price_of("B07ZZ11PQR", "$8.49 - $15.99") <= 15.99
    assert price_of("B07ZZ11PQR", "$8.49 - $15.99") == price_of("B07ZZ11PQR", "$8.49 - $15.99")
    assert [g.asin for g in RealCatalog(FIXTURE, 233).goals] == [g.asin for g in cat.goals]   # seeded order


def test_an_episode_on_real_data_buys_and_is_scored_by_the_webshop_reward():
    env = _env()
    tasks = env.tasks("test")
    assert len(tasks) == 4 and env.tasks("train") == []
    task = next(t for t in tasks if "hair styling cream" in t.payload["instruction"])
    assert task.payload["env_version"] == "webshop-real-v1"
    env.reset(task)
    _act(env, "search", "long lasting hair styling cream natural ingredients")
    assert env.site.results[0]["asin"] == "B09QKP7XQL"
    _act(env, "click", "b09qkp7xql")
    _act(env, "click", "8 ounce")
    _act(env, "click", "unscented")
    step = _act(env, "click", "buy now")
    assert step.done and step.reward == pytest.approx(1.0)
    env.reset(task)                                          # the wrong product of the same type
    _act(env, "search", "hair styling paste")
    _act(env, "click", "b07zz11pqr")
    step = _act(env, "click", "buy now")
    assert step.done and step.reward < 0.5


def data_source(section) -> str:
    from hr1_jax.eval.provenance import data_sources
    return data_sources(["webshop"], {"webshop": dict(section)})["webshop"]


def test_real_data_is_validated_and_labelled(tmp_path):
    section = defaults()
    assert data_source(section).startswith("WebShop SUBSTITUTE")
    section.data_dir = str(tmp_path)
    with pytest.raises(ConfigError, match="webshop.data_dir.*items_shuffle.json"):
        validate(section, None)
    section.data_dir = FIXTURE
    validate(section, None)
    assert data_source(section) == (f"WebShop REAL data from {FIXTURE} (items_shuffle, items_ins_v2, "
                                    "items_human_ins)")
    substitute = WebShopEnv(defaults()).tasks("test")[0]
    real = _env().tasks("test")[0]
    assert substitute.payload["webshop_task_manifest"]["sha256"] != real.payload["webshop_task_manifest"]["sha256"]


def test_report_footnote_names_the_real_data(tmp_path):
    from hr1_jax.eval.report import write_reports
    from hr1_jax.eval.results import EvalResult, MethodResult, TaskPair
    result = EvalResult(title="t", methods=[MethodResult(name="E", pairs=[TaskPair("webshop", 0, 0, "b", 0.5, 1.0)])])
    source = data_source({"data_dir": FIXTURE})
    prov = {"commit": "c", "config": "c", "date": "d", "target": "t", "engineer": "", "engineer_step": None,
            "data": {"webshop": source}}
    md = open(write_reports(result, str(tmp_path), n_boot=100, provenance=prov)["md"]).read()
    assert f"‡ {source}." in md and "substitute environment" not in md
