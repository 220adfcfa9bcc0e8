"""WebShop (substitute): goals and splits, catalog determinism, the original reward formula, page
layouts and clickables, the hook ctx contract and the task identity manifest."""
import json
import os
import pathlib
import random
import subprocess
import sys

import pytest

from envs.base import Action
from envs.webshop import goals, identity, reward
from envs.webshop.env import WebShopEnv, parse_requirements
from envs.webshop.search import BM25Index
from hr1_jax.patch.reference import REFERENCE_PATCH_DIR

REPO = pathlib.Path(__file__).resolve().parents[2]
REPLAY = REFERENCE_PATCH_DIR / "demo" / "artifacts" / "replay_states.json"


@pytest.fixture(scope="module")
def env():
    return WebShopEnv()


@pytest.fixture(scope="module")
def catalog(env):
    return env.catalog


def click(env, value):
    return env.step(env.action_from_tool_call("click_action", {"value": value}))


def search(env, keywords):
    return env.step(env.action_from_tool_call("search_action", {"keywords": keywords}))


# --- goals and splits -------------------------------------------------------------------------
def test_goal_order_is_upstream_seed_233_shuffle_and_splits_have_upstream_ranges():
    texts = goals.instructions()
    assert len(texts) == 12087
    expected = list(range(len(texts)))
    random.seed(233)                    # exactly what WebShop's SimServer does to its goal list
    random.shuffle(expected)
    assert list(goals.goal_order(233)) == expected
    assert goals.split_range("test") == range(0, 500)
    assert goals.split_range("dev") == range(500, 1500)
    assert goals.split_range("train") == range(1500, 12087)
    with pytest.raises(ValueError, match="unknown WebShop split"):
        goals.split_range("valid")


def test_instruction_parse_takes_type_attributes_and_options_from_the_text():
    p = goals.parse_instruction("i need a slim fit gray colored coat that has long sleeves. it should be in "
                                "x-large size")
    assert p.type_phrase == "coat"
    assert "slim fit" in p.attributes
    assert p.options == {"color": "gray", "size": "x-large"}
    p = goals.parse_instruction("i need a chocolate coated wafers with a 4.41 ounce size. and i choose the "
                                "caramel flavor")
    assert p.options["size"] == "4.41 ounce" and p.options["flavor"] == "caramel"
    # every parsed goal has 1-3 attributes and 0-3 options, all words of its instruction (sizes
    # normalised: "extra large" -> "x-large", "pack of four" -> "pack of 4")
    for text in goals.instructions()[:300]:
        p = goals.parse_instruction(text)
        assert 1 <= len(p.attributes) <= 3 and len(p.options) <= 3
        norm = p.instruction.replace("extra large", "x-large").replace("extra small", "x-small")
        norm = " ".join(goals.NUMBER_WORDS.get(w, w) for w in norm.split())
        for value in list(p.attributes) + list(p.options.values()):
            assert all(any(w in t for t in (norm, norm.replace("-", " "), p.instruction))
                       for w in value.split()), (text, value)


# --- catalog ----------------------------------------------------------------------------------
def test_catalog_goals_follow_upstream_price_rule_and_distractors_miss_one_part(catalog):
    kinds = {}
    for g in catalog.goals[:200]:
        products = catalog.products_of_goal(g)
        goal_product = products[0]
        assert goal_product["asin"] == g.asin and goal_product["kind"] == "goal"
        assert g.instruction_text.endswith(f", and price lower than {g.price_upper:.2f} dollars")
        # upstream: price_upper = the larger of 2 of the next 4 tens above the price (never the first)
        tens = [10.0 * i for i in range(1, 100) if 10.0 * i > goal_product["Price"]][:4]
        assert g.price_upper in tens[1:]
        goal = g.as_dict()
        for p in products:
            chosen = {k: v for k, v in goal["goal_options"].items() if v in p["options"].get(k, [])}
            r, _ = reward.get_reward(p, goal, p["Price"], chosen)
            kinds.setdefault(p["kind"], []).append(r)
    assert kinds["goal"] == [1.0] * 200                 # the goal product satisfies its goal
    assert all(r < 1.0 for r in kinds["option"]) and all(r < 1.0 for r in kinds["price"])
    assert sum(r < 1.0 for r in kinds["attribute"]) >= 0.95 * len(kinds["attribute"])
    assert sum(r < 0.5 for r in kinds["type"]) >= 0.8 * len(kinds["type"])


def test_catalog_is_deterministic_across_processes(catalog):
    """A fresh interpreter (different hash seed) builds the same catalog: prices digest, goal
    products and a product record materialised there equal ours."""
    code = ("import json; from envs.webshop.catalog import get_catalog; c = get_catalog(0, 233); "
            "g = c.goals[7]; p = c.by_asin(g.asin); "
            "print(json.dumps([c.prices_sha256, g.as_dict(), p['options'], p['Title'], len(c)]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONHASHSEED="12345"))
    assert out.returncode == 0, out.stderr
    theirs = json.loads(out.stdout)
    g = catalog.goals[7]
    p = catalog.by_asin(g.asin)
    assert theirs == json.loads(json.dumps([catalog.prices_sha256, g.as_dict(), p["options"], p["Title"],
                                            len(catalog)]))
    assert 55_000 < len(catalog) < 65_000


def test_bm25_ranks_by_term_rarity_and_frequency():
    idx = BM25Index(["red shoes", "red red shirt", "blue shoes running", "green hat"])
    assert idx.top("shoes", 10) == [0, 2]                 # shorter doc first at equal tf
    assert idx.top("red shirt", 10)[0] == 1
    assert idx.top("purple", 10) == []
    assert idx.top("hat red", 1) == [3]                   # the rarer term weighs more


def test_search_finds_the_goal_with_its_key_terms(catalog):
    found = 0
    for g in catalog.goals[:100]:
        hits = [p["asin"] for p in catalog.search(" ".join([g.query, *g.attributes, *g.goal_options.values()]))]
        found += g.asin in hits[:10]
        assert len(hits) <= 50
    assert found >= 60


# --- reward -----------------------------------------------------------------------------------
def _product(**kw):
    p = {"asin": "B000000001", "Title": "Kavelo Slim Fit Coat - Long Sleeve", "name": "Kavelo Slim Fit Coat",
         "query": "coat", "product_category": "Clothing, Shoes & Jewelry › Men › Coat",
         "Attributes": ["slim fit", "long sleeve"], "BulletPoints": ["Warm."], "Description": "A coat.",
         "options": {"color": ["gray", "black"], "size": ["large", "x-large"]}, "Price": 55.59}
    p.update(kw)
    return p


GOAL = {"asin": "B000000001", "attributes": ["slim fit", "long sleeve"],
        "goal_options": {"color": "gray", "size": "x-large"}, "price_upper": 60.0, "query": "coat",
        "name": "Kavelo Slim Fit Coat", "product_category": "Clothing, Shoes & Jewelry › Men › Coat"}


def test_reward_formula_cases():
    p = _product()
    full, info = reward.get_reward(p, GOAL, 55.59, {"color": "gray", "size": "x-large"})
    assert full == 1.0 and info["r_type"] == 1.0
    # premature buy: no options selected -> (2 attrs + 0 opts + price) / (2 + 2 + 1)
    assert reward.get_reward(p, GOAL, 55.59, {})[0] == pytest.approx(3 / 5)
    # over budget
    assert reward.get_reward(p, GOAL, 75.0, {"color": "gray", "size": "x-large"})[0] == pytest.approx(4 / 5)
    # a missing attribute (not in Attributes, title, bullets or description)
    q = _product(Attributes=["slim fit"], Title="Kavelo Slim Fit Coat")
    assert reward.get_reward(q, GOAL, 55.59, {"color": "gray", "size": "x-large"})[0] == pytest.approx(4 / 5)
    # attribute found as a substring of the description instead
    q = _product(Attributes=["slim fit"], Title="Kavelo Slim Fit Coat", Description="it has a long sleeve cut")
    assert reward.get_reward(q, GOAL, 55.59, {"color": "gray", "size": "x-large"})[0] == 1.0
    # colour normalisation (first colour word of COLOR_SET order): "heather gray" -> "gray"
    assert reward.option_matches(["heather gray"], ["gray"]) == 1
    assert reward.option_matches(["navy"], ["gray"]) == 0
    # r_type: no shared title noun -> 0; few shared nouns and no query/category match -> 0.1 / 0.5
    other = _product(name="Zenvo Garden Hose", query="hose", product_category="Garden › Hoses › Hose")
    assert reward.get_reward(other, GOAL, 55.59, {"color": "gray", "size": "x-large"})[0] == 0.0
    half = _product(name="Zenvo Coat Hanger Rack Stand", query="rack",
                    product_category="Home › Storage › Rack")
    rt = reward.type_reward(half, {**GOAL, "name": "Kavelo Coat Jacket Parka Hood Zipper"})
    assert rt["title_score"] == pytest.approx(1 / 6) and rt["r_type"] == 0.5
    rt = reward.type_reward(half, {**GOAL, "name": "Kavelo Coat Jacket Parka Hood Zipper Wool Lining Belt Cuff Pocket"})
    assert rt["title_score"] == pytest.approx(1 / 11) and rt["r_type"] == 0.1


def test_token_set_ratio_matches_the_fuzz_definition():
    assert reward.token_set_ratio("fuzzy was a bear", "fuzzy fuzzy was a bear") == 100
    assert reward.token_set_ratio("gluten-free", "gluten free") == 100
    assert reward.token_set_ratio("machine wash", "machine washable") > 85
    assert reward.token_set_ratio("long lasting", "short sleeve") < 50
    assert reward._indel_ratio("this is a test", "this is a test!") == pytest.approx(96.5517, abs=1e-3)


# --- pages, clickables, actions ------------------------------------------------------------------
def test_page_layouts_clickables_and_navigation(env):
    task = env.tasks("test")[3]
    goal = task.oracle["goal"]
    first = env.reset(task)
    instr = goal["instruction_text"]
    assert first == (f"The initial observation:\nWebShop [SEP] Instruction: [SEP] {instr} [SEP] Search"
                     "\n\nAvailable Actions:\n{'has_search_bar': True, 'clickables': ['search']}")
    # clicking on the search page is a no-op; searching works
    assert click(env, "buy now").info["valid"] is False
    res = search(env, goal["query"])
    obs = res.observation.split("\n\nObservation:\n", 1)[1].split("\n\nAvailable Actions:\n")[0]
    assert res.observation.startswith(f"Action: search[{goal['query']}]\n\nObservation:\n")
    assert obs.startswith(f"Instruction: [SEP] {instr} [SEP] Back to Search [SEP] Page 1 (Total results: 50)"
                          " [SEP] Next > [SEP] B0")
    acts = env.site.available_actions()
    assert acts["has_search_bar"] is False
    assert acts["clickables"][:2] == ["back to search", "next >"] and len(acts["clickables"]) == 12
    assert all(c == c.lower() for c in acts["clickables"])
    # a search without a search bar is invalid (no-op, same page)
    assert search(env, "anything").info["valid"] is False and env.site.page == "results"
    click(env, "next >")
    assert "Page 2 (Total results: 50) [SEP] < Prev [SEP] Next >" in env.site.observation()
    assert env.site.clickables()[:3] == ["back to search", "< prev", "next >"]
    click(env, "< prev")
    asin = env.site.clickables()[2]
    click(env, asin)
    p = env.site.product
    item = env.site.observation()
    opts = " [SEP] ".join(f"{k} [SEP] " + " [SEP] ".join(v) for k, v in p["options"].items())
    expected = (f"Instruction: [SEP] {instr} [SEP] Back to Search [SEP] < Prev [SEP] " + (opts + " [SEP] " if opts else "")
                + f"{p['Title']} [SEP] Price: ${p['Price']:.2f} [SEP] Rating: N.A. [SEP] Description [SEP] "
                "Features [SEP] Reviews [SEP] Buy Now")
    assert item == expected
    cl = env.site.clickables()
    assert cl[:6] == ["back to search", "< prev", "description", "features", "reviews", "buy now"]
    assert set(cl[6:]) == {v.lower() for vals in p["options"].values() for v in vals}
    click(env, "features")
    assert env.site.observation() == (f"Instruction: [SEP] {instr} [SEP] Back to Search [SEP] < Prev [SEP] "
                                      + " [SEP] ".join(p["BulletPoints"]))
    assert env.site.clickables() == ["back to search", "< prev"]
    click(env, "< prev")
    assert env.site.page == "item"
    # an option name (not a value) and a full title are not clickables
    assert click(env, p["Title"]).info["valid"] is False
    if p["options"]:
        kind, values = next(iter(p["options"].items()))
        assert click(env, kind).info["valid"] is (kind in cl)
        click(env, values[-1].upper())                      # values are matched case-insensitively
        assert env.site.options == {kind: values[-1]}
    done = click(env, "buy now")
    assert done.done and 0.0 <= done.reward <= 1.0
    result = env.final_result()
    assert result["status"] == "completed" and result["reward"] == done.reward
    assert result["success"] == (done.reward >= 1.0) and result["benchmark_display"] == "webshop (substitute)"


def test_no_purchase_scores_zero(env):
    task = env.tasks("test")[0]
    env.reset(task)
    search(env, "socks")
    result = env.final_result()
    assert result == {**result, "reward": 0.0, "success": False, "status": "task_limit_reached"}


# --- hook actions and ctx -----------------------------------------------------------------------
def test_action_from_hook_wraps_like_the_reference(env):
    env.reset(env.tasks("test")[0])
    click_now = Action("click_action", {"value": "buy now"}, "click[buy now]")
    search_now = Action("search_action", {"keywords": "x"}, "search[x]")
    assert env.action_from_hook("Gray", click_now, "on_before_action").text == "click[gray]"
    assert env.action_from_hook("red shoes", search_now, "on_before_action").text == "search[red shoes]"
    assert env.action_from_hook("red shoes", search_now, "on_post_step").text == "click[red shoes]"
    forced = env.action_from_hook("search[blue hat]", click_now, "on_before_action")
    assert (forced.tool, forced.text, forced.arguments) == ("search_action", "search[blue hat]", {"keywords": "blue hat"})
    assert env.action_from_hook("   ", click_now, "on_before_action") is None
    assert env.action_from_tool_call("click_action", {"value": "buy now"}).text == "click[buy now]"
    assert env.action_from_tool_call("open_page", {"value": "x"}) is None
    assert env.action_from_tool_call("click_action", {"value": {"x": 1}}) is None


def _goal_with_two_options(env):
    for task in env.tasks("test"):
        req = parse_requirements(task.oracle["goal"]["instruction_text"])
        if req["required_color"] and req["required_size"] and \
                set(task.oracle["goal"]["goal_options"]) == {"color", "size"}:
            return task
    raise AssertionError("no test goal with colour and size")


def test_ctx_fields_and_predicates_follow_the_reference_contract(env):
    replay = json.loads(REPLAY.read_text())["scenarios"]
    task = _goal_with_two_options(env)
    goal = task.oracle["goal"]
    env.reset(task)
    init = env.hook_context("on_init", turn=0)
    assert init["state"]["clickables"] == [] and init["state"]["has_search_bar"] is False
    assert init["remaining_steps"] == env.max_turns == 20
    search(env, goal["query"] + " " + " ".join(goal["goal_options"].values()))
    while goal["asin"].lower() not in env.site.clickables():
        click(env, "next >")
    click(env, goal["asin"].lower())
    buy = env.action_from_tool_call("click_action", {"value": "buy now"})
    ctx = env.hook_context("on_before_action", turn=3, action=buy)
    # every field the reference replay states carry exists here, with the same types
    for scenario in replay:
        ref = scenario["ctx"]
        for section in ("action", "state", "task", "predicates"):
            missing = set(ref[section]) - set(ctx[section])
            assert not missing, (section, missing)
        assert set(ref) - {"admissible"} <= set(ctx) and "admissible" in ctx
    assert ctx["action"] == {"tool": "click_action", "value": "buy now", "value_normalized": "buy now",
                             "final_action": "click[buy now]"}
    st = ctx["state"]
    assert st["page_type"] == "product_detail" and st["buy_now_available"] is True
    assert st["remaining_steps"] == 17 and st["price_max"] == goal["price_upper"]
    assert st["current_price"] == env.site.product["Price"]
    assert ctx["task"]["required_color"] == goal["goal_options"]["color"]
    assert ctx["task"]["required_size"] == goal["goal_options"]["size"]
    assert ctx["predicates"]["required_options_unselected"] is True
    assert ctx["predicates"]["product_price_over_budget"] is False
    assert ctx["webshop"]["current_asin"] == goal["asin"]
    assert ctx["webshop"]["attribute_options"] == env.site.product["options"]
    # not a pending buy -> predicate not computed (false)
    other = env.action_from_tool_call("click_action", {"value": "features"})
    assert env.hook_context("on_before_action", turn=3, action=other)["predicates"][
        "required_options_unselected"] is False
    for value in goal["goal_options"].values():
        click(env, value)
    ctx = env.hook_context("on_before_action", turn=5, action=buy)
    assert ctx["predicates"]["required_options_unselected"] is False
    assert ctx["webshop"]["selected_attributes"] == {"color": goal["goal_options"]["color"],
                                                      "size": goal["goal_options"]["size"]}
    # selecting options is progress, not a stall; opening sub-pages is
    assert ctx["state"]["product_stall_turns"] == 0
    click(env, "features")
    click(env, "< prev")
    post = env.hook_context("on_post_step", turn=7)
    assert post["state"]["product_stall_turns"] == 2 and post["predicates"]["product_page_stalled"] is True
    assert post["action"] == {"tool": "", "value": "", "value_normalized": "", "final_action": ""}
    assert post["remaining_steps"] == 20 - 7 - 1
    # the over-budget near-duplicate trips the budget predicate
    price_twin = next(d for d in task.oracle["distractors"] if d["kind"] == "price")
    env.site.product = env.catalog.by_asin(price_twin["asin"])
    ctx = env.hook_context("on_before_action", turn=8, action=buy)
    assert ctx["predicates"]["product_price_over_budget"] is True
    # search loops: back to search twice / a repeated query
    click(env, "back to search")
    search(env, "coat")
    click(env, "back to search")
    search(env, "coat")
    ctx = env.hook_context("make_pre_hint", turn=12)
    assert ctx["state"]["back_to_search_count"] == 2 and ctx["state"]["duplicate_search_count"] == 2
    assert ctx["predicates"]["search_loop_detected"] and ctx["predicates"]["duplicate_search_repeated"]
    assert ctx["state"]["page_type"] == "search_results"
    json.dumps(ctx)                      # ctx is plain JSON data


# --- identity ------------------------------------------------------------------------------------
def test_task_identity_manifest_is_stable_and_checked(env):
    a, b = env.tasks("test")[:5], WebShopEnv().tasks("test")[:5]
    assert [t.payload for t in a] == [t.payload for t in b]
    m = a[2].payload["webshop_task_manifest"]
    assert identity.verify_manifest(m)
    assert m["protocol"] == "webshop_task_manifest_v1" and m["goal_seed"] == 233 and m["index"] == 2
    assert m["env_version"] == WebShopEnv.env_version and len(m["product_prices_sha256"]) == 64
    assert len({t.payload["webshop_task_manifest"]["sha256"] for t in a}) == 5
    assert not identity.verify_manifest({**m, "index": 3})
    dev = env.tasks("dev")
    assert len(dev) == 1000 and dev[0].task_id == 0 and dev[0].payload["goal_index"] == 500
    # a task built for another catalog / goal seed is refused at reset
    forged = type(a[2])(benchmark="webshop", split="test", task_id=2,
                        payload={**a[2].payload, "webshop_task_manifest": {**m, "sha256": "0" * 64}},
                        oracle=a[2].oracle)
    with pytest.raises(ValueError, match="identity mismatch"):
        env.reset(forged)
    env.reset(a[2])
    man = env.task_manifest(a[2], seed=0)
    assert man["webshop_task_manifest"] == m and man == env.task_manifest(a[2], seed=0)


def test_config_section_validates_and_reaches_the_env():
    from hr1_jax.config import ConfigError, base_config
    from envs.webshop import config as ws_config
    cfg = base_config()
    ws_config.validate(cfg.webshop, cfg)
    cfg.webshop.max_rounds = 0
    with pytest.raises(ConfigError, match="webshop.max_rounds"):
        ws_config.validate(cfg.webshop, cfg)
    env = WebShopEnv({"max_rounds": 7, "goal_seed": 233, "catalog_seed": 0})   # dict form (workers)
    assert env.max_turns == 7 and WebShopEnv().max_turns == 20
