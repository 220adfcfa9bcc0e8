"""WebShop (SUBSTITUTE) environment: the runtime interface over the simulated site.

The real WebShop cannot run offline (no product catalog); this is the self-contained substitute
of environments.md §2c with the real mechanics: the 12,087 real instructions, goal order by
`random.seed(233)` shuffle and upstream index ranges, BM25 search, the real page text layout and
clickables, `search_action` / `click_action` tools, the original reward formula and 20 rounds.
Results from it are always labelled "webshop (substitute)".

Hook ctx (reference spec §4.1 field names) comes from the page-state tracker kept here: page
type, clickables, search/back-to-search/duplicate counters, product stall turns, prices, the
rule-based parse of the instruction (task type, required colour/size/material) and predicates.

Deviations from the real WebShop, all forced by the missing product data:
- ~60k synthetic products (goal + 3-4 near-duplicates per instruction) instead of 1.18M real
  ones; goal attributes/options are parsed from the instruction by rules (`goals.py`) instead of
  crowd labels, so the ctx requirement parse and the goal labels agree exactly.
- Own BM25 over title/attributes/goal option values instead of Lucene over full product text.
- Title nouns for r_type without spaCy (`reward.title_nouns`); single prices (no ranges); no reviews.
- The task manifest payload adds `env_version` and `catalog_seed` (they define the catalog).
"""
from __future__ import annotations

import copy
import re
from typing import ClassVar

from envs.base import Action, Environment, StepResult, Task
from envs.webshop import goals as goals_mod
from envs.webshop import identity
from envs.webshop.catalog import Catalog, get_catalog
from envs.webshop.site import Site, parse_action

BENCHMARK = "webshop"
DISPLAY_NAME = "webshop (substitute)"
WRAPPED_RE = re.compile(r"^\s*[a-z_]+\[.*\]\s*$", re.S)
PRICE_RE = re.compile(r"price lower than\s+([\d.]+)\s+dollars")

TOOLS = [
    {"type": "function", "function": {
        "name": "search_action",
        "description": "Search WebShop for products. Only available when the page has a search bar "
                       "(has_search_bar is true). Use the product name and key features as keywords.",
        "parameters": {"type": "object", "properties": {
            "keywords": {"type": "string", "description": "The search keywords."}},
            "required": ["keywords"]}}},
    {"type": "function", "function": {
        "name": "click_action",
        "description": "Click a button, product link or option on the current page. The value must "
                       "be exactly one of the available clickables.",
        "parameters": {"type": "object", "properties": {
            "value": {"type": "string", "description": "One of the current clickables, e.g. "
                                                       "'back to search', a product id, an option "
                                                       "value or 'buy now'."}},
            "required": ["value"]}}},
]
TOOL_TO_VERB = {"search_action": "search", "click_action": "click"}
ARG_NAME = {"search_action": "keywords", "click_action": "value"}

SYSTEM_PROMPT = """You are a web shopping agent. You are given a shopping instruction and you act on \
a WebShop website through the provided tools; you must call exactly one tool in every turn.
- Use search_action(keywords) on the search page. Keywords should be the product name and its key \
features, not prices.
- Use click_action(value) to click; the value must be exactly one of the available clickables.
- Choose a product whose title matches all key terms of the instruction and whose price is within \
the budget.
- On the product page, select every option the instruction requires (color, size, flavor, ...), \
then click buy now immediately. If all required options are already selected, only buy now is \
correct."""


def parse_requirements(instruction: str) -> dict:
    """Rule-based parse of the instruction (public text only): the ctx `task` fields."""
    text = PRICE_RE.sub("", instruction)
    parsed = goals_mod.parse_instruction(text)
    return {
        "task_type": goals_mod.product_type(parsed),
        "required_color": parsed.options.get("color"),
        "required_size": parsed.options.get("size"),
        "required_material": parsed.material,
        # other parsed option values (flavor, scent) count as required specs for the predicate
        "required_specs": [v for k, v in parsed.options.items() if k not in ("color", "size")],
    }


def _norm(s) -> str:
    return re.sub(r"\s+", " ", str(s or "")).strip().lower()


def _matches(req: str, option: str) -> bool:
    r, o = _norm(req), _norm(option)
    if not r or not o:
        return False
    if r == o or r in o or o in r:
        return True
    r2, o2 = re.sub(r"[\s\-_]", "", r), re.sub(r"[\s\-_]", "", o)
    return bool(r2) and (r2 == o2 or r2 in o2 or o2 in r2)


class WebShopEnv(Environment):
    benchmark: ClassVar[str] = BENCHMARK
    env_version: ClassVar[str] = "webshop-substitute-v1"

    def __init__(self, config=None):
        """`config`: the `webshop` config section (ConfigDict or its dict form) or None."""
        from envs.webshop.config import defaults
        base = defaults()

        def get(key):
            try:
                return config[key]
            except (KeyError, TypeError):
                return base[key]
        self.max_turns = int(get("max_rounds"))
        self.goal_seed = int(get("goal_seed"))
        self.catalog_seed = int(get("catalog_seed"))
        self.data_dir = str(get("data_dir") or "")
        if self.data_dir:   # the real product/goal files: other tasks, other identities
            self.env_version = "webshop-real-v1"
        self._catalog: Catalog | None = None
        self.site: Site | None = None
        self.task: Task | None = None

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            if self.data_dir:
                from envs.webshop.real_data import get_real_catalog
                self._catalog = get_real_catalog(self.data_dir, self.goal_seed)
            else:
                self._catalog = get_catalog(self.catalog_seed, self.goal_seed)
        return self._catalog

    # --- tasks -------------------------------------------------------------------------------
    def tasks(self, split: str) -> list[Task]:
        ids = goals_mod.split_range(split)
        if self.data_dir:   # the same split bounds over the real goal list
            ids = range(min(ids.start, len(self.catalog.goals)),
                        len(self.catalog.goals) if goals_mod.SPLITS[split][1] is None
                        else min(ids.stop, len(self.catalog.goals)))
        return [self.task_for_goal(i, split=split, task_id=k) for k, i in enumerate(ids)]

    def task_for_goal(self, goal_index: int, *, split: str = "", task_id: int | None = None) -> Task:
        goal = self.catalog.goals[goal_index]
        manifest = identity.task_manifest(
            goal_seed=self.goal_seed, index=goal_index, instruction=goal.instruction_text,
            goal=goal.as_dict(), product_prices_sha256=self.catalog.prices_sha256,
            env_version=self.env_version, catalog_seed=self.catalog_seed)
        payload = {"instruction": goal.instruction_text, "goal_index": goal_index,
                   "goal_seed": self.goal_seed, "catalog_seed": self.catalog_seed,
                   "env_version": self.env_version, "webshop_task_manifest": manifest}
        listing = self.catalog.listing_of_goal(goal)
        oracle = {"goal": goal.as_dict(), "goal_title": listing[0]["Title"],
                  "goal_price": listing[0]["Price"], "distractors": listing[1:]}
        return Task(benchmark=BENCHMARK, split=split, task_id=goal_index if task_id is None else task_id,
                    payload=payload, oracle=oracle)

    # --- episode -----------------------------------------------------------------------------
    def tool_specs(self) -> list[dict]:
        return copy.deepcopy(TOOLS)

    def system_prompt(self, tips: list[str], tool_hint: str) -> str:
        text = SYSTEM_PROMPT
        tips = [t for t in tips if t]
        if tips:
            text += "\n\nSome tips that may help for this task:\n" + "\n".join(f"- {t}" for t in tips)
        return text

    def reset(self, task: Task) -> str:
        idx = int(task.payload["goal_index"])
        goal = self.catalog.goals[idx]
        expected = task.payload.get("webshop_task_manifest", {}).get("sha256")
        self.manifest = identity.task_manifest(
            goal_seed=self.goal_seed, index=idx, instruction=goal.instruction_text,
            goal=goal.as_dict(), product_prices_sha256=self.catalog.prices_sha256,
            env_version=self.env_version, catalog_seed=self.catalog_seed)
        if expected != self.manifest["sha256"]:
            raise ValueError(f"webshop task identity mismatch for goal {idx}: the task was built for a "
                             f"different goal seed, catalog seed or env version")
        self.task = task
        self.site = Site(self.catalog, goal)
        self.requirements = parse_requirements(goal.instruction_text)
        m = PRICE_RE.search(goal.instruction_text)
        self.price_max = float(m.group(1)) if m else None
        # page-state tracker (spec §4.1)
        self.search_queries: list[str] = []
        self.back_to_search_count = 0
        self.asins_visited: list[str] = []
        self.product_stall_turns = 0
        self.last_valid = True
        return self._message("The initial observation:\n", self.site.observation())

    def _message(self, prefix: str, obs: str) -> str:
        return f"{prefix}{obs}\n\nAvailable Actions:\n{self.site.available_actions()}"

    def action_from_tool_call(self, name: str, arguments: dict) -> Action | None:
        if name not in TOOL_TO_VERB or not isinstance(arguments, dict):
            return None
        raw = arguments.get(ARG_NAME[name])
        if raw is None and arguments:
            raw = next(iter(arguments.values()))     # first argument value = raw value (upstream)
        if not isinstance(raw, (str, int, float)):
            return None
        raw = str(raw)
        return Action(tool=name, arguments={ARG_NAME[name]: raw}, text=f"{TOOL_TO_VERB[name]}[{raw}]")

    def action_from_hook(self, action: str, current: Action | None, site: str) -> Action | None:
        text = _norm(action)
        if not text:
            return None
        if WRAPPED_RE.match(text):
            parsed = parse_action(text)
            if parsed is None:
                return Action(tool=current.tool if current else "click_action", arguments={}, text=text)
            verb, arg = parsed
            tool = "search_action" if verb == "search" else "click_action"
            return Action(tool=tool, arguments={ARG_NAME[tool]: arg}, text=text)
        # post-step forces always wrap as click; otherwise by the agent's current tool
        tool = "search_action" if (site != "on_post_step" and current is not None
                                   and current.tool == "search_action") else "click_action"
        return Action(tool=tool, arguments={ARG_NAME[tool]: text}, text=f"{TOOL_TO_VERB[tool]}[{text}]")

    def step(self, action: Action) -> StepResult:
        before_asin = self.site.product["asin"] if self.site.product else None
        before_options = dict(self.site.options)
        obs, reward, done, info = self.site.step(action.text)
        self.last_valid = info["valid"]
        parsed = parse_action(action.text)
        if info["valid"] and parsed:
            verb, arg = parsed
            if verb == "search":
                self.search_queries.append(_norm(arg))
            elif _norm(arg) == "back to search":
                self.back_to_search_count += 1
        p = self.site.product
        if p is not None and p["asin"] not in self.asins_visited:
            self.asins_visited.append(p["asin"])
        same_product = p is not None and p["asin"] == before_asin and self.site.page in ("item", "sub")
        progressed = self.site.options != before_options
        self.product_stall_turns = self.product_stall_turns + 1 if (same_product and not progressed) else 0
        info = dict(info, page=self.site.page)
        return StepResult(observation=self._message(f"Action: {action.text}\n\nObservation:\n", obs),
                          reward=reward, done=done, info=info)

    # --- hook ctx ------------------------------------------------------------------------------
    def _page_type(self, obs: str, actions: dict) -> str:
        if actions["has_search_bar"]:
            return "home"
        if "Total results:" in obs:
            return "search_results"
        if "buy now" in actions["clickables"] or re.search(r"\bDescription \[SEP\] Features \[SEP\] Reviews\b", obs):
            return "product_detail"
        return "unknown"

    def _options_unselected(self, clickables: list[str]) -> bool:
        """required_options_unselected for a pending buy now (spec §4.1)."""
        p = self.site.product
        if p is None:
            return False
        req = self.requirements
        wanted = [req["required_color"], req["required_size"]] + list(req["required_specs"])
        selected = {k: _norm(v) for k, v in self.site.options.items()}
        for value in (w for w in wanted if w):
            for kind, values in p["options"].items():
                hit = next((v for v in values if _matches(value, v) and _norm(v) in clickables), None)
                if hit is not None and selected.get(kind) != _norm(hit):
                    return True
        if not selected and p["options"]:
            return True
        return False

    def hook_context(self, site: str, *, turn: int, action: Action | None = None,
                     raw_output: str = "") -> dict:
        obs = self.site.observation()
        if site == "on_init":           # upstream quirk: no actions computed before the first turn
            actions = {"has_search_bar": False, "clickables": []}
            remaining = self.max_turns
        else:
            actions = self.site.available_actions()
            remaining = self.max_turns - turn - (1 if site == "on_post_step" else 0)
        clickables = [c.lower() for c in actions["clickables"]]
        if site == "on_before_action" and action is not None:
            tool = action.tool
            value = str(next(iter(action.arguments.values()), "")) if action.arguments else ""
            final = action.text
        else:
            tool, value, final = "", "", ""
        parsed = parse_action(final)
        pending_buy = (site == "on_before_action" and parsed is not None and parsed[0] == "click"
                       and _norm(parsed[1]) == "buy now")
        p = self.site.product
        current_price = float(p["Price"]) if p is not None and self.site.page in ("item", "sub") else None
        query_counts: dict[str, int] = {}
        for q in self.search_queries:
            query_counts[q] = query_counts.get(q, 0) + 1
        dup = max(query_counts.values(), default=0)
        page_type = self._page_type(obs, actions)
        state = {
            "page_type": page_type,
            "has_search_bar": actions["has_search_bar"],
            "clickables": clickables,
            "buy_now_available": "buy now" in clickables,
            "back_to_search_count": self.back_to_search_count,
            "duplicate_search_count": dup,
            "product_stall_turns": self.product_stall_turns,
            "same_click_count": 0,          # stays 0 with built-in H2 disabled (as upstream)
            "remaining_steps": remaining,
            "current_price": current_price,
            "price_max": self.price_max,
        }
        req = self.requirements
        over = (current_price is not None and self.price_max is not None
                and current_price > self.price_max * 1.05)
        predicates = {
            "required_options_unselected": bool(pending_buy and self._options_unselected(clickables)),
            "product_price_over_budget": bool(over),
            "same_click_repeated": False,
            "duplicate_search_repeated": dup >= 2,
            "search_loop_detected": self.back_to_search_count >= 2 or dup >= 2,
            "product_page_stalled": self.product_stall_turns >= 2,
            "buy_now_available": "buy now" in clickables,
            "search_not_available": not actions["has_search_bar"],
            "action_not_admissible": False,  # only set by the disabled built-in H2 upstream
        }
        return {
            "benchmark": BENCHMARK,
            "action": {"tool": tool, "value": value, "value_normalized": _norm(value),
                       "final_action": final},
            "state": state,
            "task": {"task_type": req["task_type"], "required_color": req["required_color"],
                     "required_size": req["required_size"],
                     "required_material": req["required_material"],
                     "instruction": self.site.instruction},
            "predicates": predicates,
            "admissible": list(clickables),
            "observation": obs,
            "step": turn,
            "max_step": self.max_turns,
            "remaining_steps": remaining,
            "webshop": {
                "search_queries": list(self.search_queries),
                "asins_visited": list(self.asins_visited),
                "current_asin": p["asin"] if p is not None else None,
                "selected_attributes": dict(self.site.options),
                "attribute_options": {k: list(v) for k, v in p["options"].items()} if p is not None else {},
            },
        }

    def manifest_extras(self, task: Task) -> dict:
        """The WebShop task manifest (spec §5.2) joins the runtime's generic task manifest."""
        return {"webshop_task_manifest": dict(self.manifest)}

    # --- result --------------------------------------------------------------------------------
    def final_result(self) -> dict:
        site = self.site
        bought = site is not None and site.purchased is not None
        reward = float(site.reward) if bought else 0.0
        return {
            "reward": reward,
            "success": reward >= 1.0,
            "status": "completed" if bought else "task_limit_reached",
            "benchmark_display": DISPLAY_NAME,
            "purchased_asin": site.purchased["asin"] if bought else None,
            "reward_info": dict(site.reward_info) if bought else {},
            "webshop_task_manifest": dict(self.manifest),
        }
