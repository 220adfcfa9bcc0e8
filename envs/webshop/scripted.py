"""Scripted WebShop (substitute) target: a seeded simulator of a small LLM shopping agent.

It knows the goal from `Task.oracle` (goal ASIN, required attributes/option values, budget; the
ASINs and kinds of the goal's near-duplicate distractors) and reads the page from the messages
(the last observation and its `Available Actions`). A competent episode is: search with the
product type + key features -> open the goal product (paging `next >` up to twice if it is not
on page 1) -> select every required option -> buy now. Failure modes, drawn once per episode
from `(seed, task)` (rates at skill 0.6):

| mode | rate | what it does | what rescues it |
|---|---|---|---|
| whole-instruction search | 0.25 | searches the instruction incl. the price clause | (often harmless: BM25) |
| vague search | 0.20 | searches the product type only; the goal is often not on page 1 | careful picking / paging |
| careless pick | 0.50 | clicks the top result it has not opened yet, without checking title or price | a "match all terms / verify" hint or tip: picks carefully |
| over-budget pick | 0.15 | prefers the over-budget near-duplicate if it is listed | a budget block/hint: go back, pick in-budget |
| skipped options (premature buy) | 0.50 | clicks buy now without selecting any option | a block/hint on unselected options: selects them |
| partial options | 0.15 | selects only the first required option | same |
| no variant check | 0.50 | buys a product lacking the required option value anyway | an options block whose text says to go back |
| search loop | 0.12 | after opening a product goes back to search and repeats the same search 3-6 times (often never buys) | a loop/"buy now" hint |
| invalid click | 0.04 / turn | clicks a title, an option *name* or a capitalised phrase that is not a clickable | — (no-op turn) |
| text-only turn | 0.03 / turn | answers without a tool call | — |

Rates scale with `config.skill` (`rate * (1 - skill) / 0.4`; skill 1.0 = none) and can be
overridden per mode with `config.webshop_rates`. Every harness text (pre-hint and post-step user
messages, block texts returned for a tool call, on_init tips in the system prompt and the tool
hint appended to tool descriptions) is classified by *kind* only (options, budget, back, loop,
careful, buy) and followed with probability `config.hint_follow_prob` (standing tips and tool
hints: half of it, once per episode); the option values,
product and budget always come from the oracle, never from hook messages. A block it does not
follow makes it retry the same action.

Deterministic given (seed, messages): each draw is keyed by (seed, task identity, draw name,
message index); the episode state is re-derived from the messages on every call.
At the defaults (skill 0.6, hint_follow_prob 0.7, seed 0) the baseline on the substitute's `test`
split (500 goals) is mean reward 0.687 (score 68.7), success 177/500 = 35.4% (the paper's
Qwen3.5-9B: 66.0 / 31.2 on the real WebShop); skill 1.0 scores >= 0.95. The three Harness-R1
held-out patches raise it to 0.716 / 0.720 / 0.778 (success 246 / 254 / 351), the two looping
Qwen3.5-397B rewrite patches drop it to 0.29 / 0.33 (benchmarks/bench_envs_webshop.py
--reference-patches; tests/envs/test_webshop_scripted.py).
"""
from __future__ import annotations

import ast
import hashlib
import json
import random
import re

from envs.base import Task
from envs.scripted import behaviour

DEFAULT_RATES = {
    "whole_instruction": 0.25, "vague_search": 0.20, "careless_pick": 0.50, "over_budget": 0.15,
    "skip_options": 0.50, "partial_options": 0.15, "no_variant_check": 0.50, "search_loop": 0.12,
    "invalid_click": 0.04, "text_only": 0.03,
}
MAX_PAGES = 3
SEP = " [SEP] "
ASIN_RE = re.compile(r"^B0[0-9A-Z]{8}$")

# Kinds of harness text, by keywords (lower case). "buy" only counts without a negation.
_KINDS = {
    "options": ("option", "select", "variant", "color", "colour", "size", "unselected", "flavor",
                "attribute"),
    "budget": ("budget", "price", "cheaper", "expensive", "over the", "in-budget"),
    "back": ("back to search", "go back", "search again", "another product", "different product",
             "search/results", "return to search"),
    "loop": ("loop", "repeat", "same search", "stop searching", "already searched", "duplicate"),
    "careful": ("match all", "matches all", "key terms", "verify", "title", "constraints", "evidence"),
    "buy": ("buy now", "purchase", "click buy"),
}
_NEGATION = re.compile(r"\b(?:do not|don't|dont|not yet|before|never|avoid|instead of)\b")
_BOILERPLATE = ("you must call one of the provided tools", "invalid tool call")




def kinds_of(text: str) -> set[str]:
    low = " " + re.sub(r"\s+", " ", str(text).lower()) + " "
    kinds = {k for k, words in _KINDS.items() if any(w in low for w in words)}
    if "buy" in kinds and _NEGATION.search(low):
        kinds.discard("buy")
    return kinds


def _norm(s) -> str:
    return re.sub(r"\s+", " ", str(s or "")).strip().lower()


def _option_match(required: str, option: str) -> bool:
    r, o = _norm(required), _norm(option)
    return bool(r and o) and (r == o or r in o or o in r)


class _View:
    """What the agent knows from the messages: the current page and its executed actions."""

    def __init__(self, messages: list[dict]):
        self.actions: list[str] = []            # executed actions, in order
        self.obs = ""
        self.available = {"has_search_bar": False, "clickables": []}
        self.harness: list[tuple[int, str]] = []   # (message index, text) since the last observation
        self.blocked = 0                           # block texts since the last observation
        self.blocked_call: tuple[str, dict] | None = None   # the last tool call the harness blocked
        last_call = None
        for i, m in enumerate(messages):
            role, content = m.get("role"), str(m.get("content") or "")
            if role == "assistant":
                for call in m.get("tool_calls") or []:
                    fn = call.get("function") or {}
                    try:
                        args = json.loads(fn.get("arguments") or "{}")
                    except (TypeError, ValueError):
                        args = {}
                    last_call = (str(fn.get("name", "")), args if isinstance(args, dict) else {})
            elif role == "tool":
                if content.startswith("Action: "):
                    self.actions.append(content.split("\n", 1)[0][len("Action: "):].strip())
                    self._set_obs(i, content)
                elif not any(b in content.lower() for b in _BOILERPLATE):
                    self.harness.append((i, content))
                    self.blocked += 1
                    self.blocked_call = last_call
            elif role == "user":
                if content.startswith(("The initial observation:", "Observation:")):
                    self._set_obs(i, content)
                elif not any(b in content.lower() for b in _BOILERPLATE):
                    self.harness.append((i, content))

    def _set_obs(self, i: int, content: str) -> None:
        body = content.split("Observation:\n", 1)[-1] if "Observation:\n" in content else content
        if "The initial observation:\n" in body:
            body = body.split("The initial observation:\n", 1)[1]
        obs, _, avail = body.partition("\n\nAvailable Actions:\n")
        self.obs = obs.strip()
        try:
            parsed = ast.literal_eval(avail.strip())
            if isinstance(parsed, dict):
                self.available = parsed
        except (ValueError, SyntaxError):
            self.available = {"has_search_bar": False, "clickables": []}
        self.harness, self.blocked, self.blocked_call = [], 0, None

    @property
    def page(self) -> str:
        if self.available.get("has_search_bar"):
            return "search"
        if "Total results:" in self.obs:
            return "results"
        if self.obs.startswith("Thank you for shopping"):
            return "done"
        if self.obs.endswith("Buy Now"):
            return "item"
        return "sub"

    @property
    def clickables(self) -> list[str]:
        return [str(c).lower() for c in self.available.get("clickables", [])]

    def result_rows(self) -> list[tuple[str, str, float]]:
        parts = self.obs.split(SEP)
        rows = []
        for j, p in enumerate(parts):
            if ASIN_RE.match(p) and j + 2 < len(parts):
                try:
                    price = float(parts[j + 2].lstrip("$").split()[0])
                except ValueError:
                    price = 0.0
                rows.append((p, parts[j + 1], price))
        return rows


class ScriptedAgent:
    name = "scripted-webshop"

    def __init__(self, task: Task, seed: int, config=None):
        self.task = task
        self.seed = int(seed)
        self.rates, _, self.hint_follow_prob = behaviour(config, DEFAULT_RATES, "webshop_rates")
        oracle = task.oracle
        self.goal = oracle["goal"]
        self.goal_asin = self.goal["asin"].upper()
        self.distractors = {d["asin"].upper(): d["kind"] for d in oracle.get("distractors", [])}
        self.required = [str(v) for v in (self.goal.get("goal_options") or {}).values()]
        manifest = task.payload.get("webshop_task_manifest") or {}
        self.key = manifest.get("sha256") or f"{task.split}:{task.task_id}"
        d = self._draw
        style = d("search_style")
        self.modes = {
            "search": ("whole" if style < self.rates["whole_instruction"] else
                       "vague" if style < self.rates["whole_instruction"] + self.rates["vague_search"]
                       else "good"),
            "careless": d("careless") < self.rates["careless_pick"],
            "over_budget": d("over_budget") < self.rates["over_budget"],
            "options": ("skip" if d("options") < self.rates["skip_options"] else
                        "partial" if d("partial") < self.rates["partial_options"] else "all"),
            "no_variant_check": d("variant") < self.rates["no_variant_check"],
            "loop": int(3 + d("loop_n") * 4) if d("loop") < self.rates["search_loop"] else 0,
            "peek": d("peek") < 0.3,
        }

    # --- randomness: keyed, so the same messages always give the same reply ---------------------
    def _draw(self, *key) -> float:
        digest = hashlib.sha256(json.dumps([self.seed, self.key, *key]).encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big")).random()

    def _follows(self, *key) -> bool:
        return self._draw("follow", *key) < self.hint_follow_prob

    # --- conversation -------------------------------------------------------------------------
    def _standing_kinds(self, messages: list[dict], tools: list[dict]) -> set[str]:
        """Kinds of on_init tips (system prompt) and tool hints (tool descriptions), each followed
        once per episode with probability hint_follow_prob."""
        from envs.webshop.env import SYSTEM_PROMPT, TOOLS
        base = {t["function"]["name"]: t["function"]["description"] for t in TOOLS}
        texts = []
        if messages and messages[0].get("role") == "system":
            texts.append(str(messages[0].get("content") or "").replace(SYSTEM_PROMPT, ""))
        for t in tools or []:
            fn = t.get("function") or {}
            texts.append(str(fn.get("description") or "").replace(base.get(fn.get("name"), ""), ""))
        # Standing advice read once at the start sticks less than a message at the moment of
        # decision: followed with half the hint-follow probability.
        return {k for k in kinds_of(" ".join(texts))
                if self._draw("follow", "standing", k) < 0.5 * self.hint_follow_prob}

    def chat(self, messages: list[dict], tools: list[dict]) -> dict:
        view = _View(messages)
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        name, args, thought = self._decide(view, self._standing_kinds(messages, tools), len(messages))
        if name is None:
            return {"role": "assistant", "content": thought, "tool_calls": []}
        call = {"id": f"call_{turn}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}
        return {"role": "assistant", "content": thought, "tool_calls": [call]}

    # --- policy ---------------------------------------------------------------------------------
    def _decide(self, view: _View, standing: set[str], n_msgs: int):
        if self._draw("text_only", n_msgs) < self.rates["text_only"]:
            return None, {}, "I should look for the product that matches the instruction."
        # Harness texts since the last observation: classified, each followed or not.
        followed: set[str] = set()
        for idx, text in view.harness:
            for k in kinds_of(text):
                if self._follows(idx, k):
                    followed.add(k)
        if view.blocked_call is not None and not followed:
            name, args = view.blocked_call           # an unheeded block: the same action again
            return name, args, "I will do that again."
        careful = not self.modes["careless"] or "careful" in standing or "careful" in followed
        over_budget = self.modes["over_budget"] and "budget" not in standing
        page = view.page
        if page != "search" and self._draw("invalid", n_msgs) < self.rates["invalid_click"]:
            return self._invalid_click(view, n_msgs)
        if page == "search":
            return "search_action", {"keywords": self._keywords(view)}, "Let me search for the product."
        if page == "results":
            return self._on_results(view, careful, over_budget, followed)
        if page == "item":
            return self._on_item(view, standing, followed)
        if page == "sub":
            return "click_action", {"value": "< prev"}, "Back to the product page."
        return None, {}, "The purchase is complete."

    def _keywords(self, view: _View) -> str:
        style = self.modes["search"]
        instruction = self.goal["instruction_text"]
        if style == "whole":
            return instruction
        if style == "vague":
            return self.goal["query"]
        words = [self.goal["query"]] + list(self.goal["attributes"]) + self.required
        return " ".join(dict.fromkeys(w for w in words if w))

    def _visits(self, view: _View) -> list[str]:
        return [a[len("click["):-1].upper() for a in view.actions
                if a.startswith("click[") and ASIN_RE.match(a[len("click["):-1].upper())]

    def _on_results(self, view: _View, careful: bool, over_budget: bool, followed: set[str]):
        rows = view.result_rows()
        visited = set(self._visits(view))
        asins = [r[0] for r in rows]
        clickables = view.clickables
        looping = self.modes["loop"] and "loop" not in followed
        budget = self.goal["price_upper"]
        target = None
        if over_budget:
            target = next((a for a in asins if self.distractors.get(a) == "price" and a not in visited), None)
        if target is None and not careful:
            # a careless agent takes the top result it has not opened yet (not the right one)
            target = next((a for a in asins if a not in visited), None)
        if target is None and self.goal_asin in asins and (self.goal_asin not in visited or looping):
            target = self.goal_asin
        if target is None:
            page = re.search(r"Page (\d+) \(Total", view.obs)
            page_num = int(page.group(1)) if page else 1
            if "next >" in clickables and page_num < MAX_PAGES:
                return "click_action", {"value": "next >"}, "The right product is not here; next page."
            fresh = [r for r in rows if r[0] not in visited and (r[2] <= budget or not careful)]
            if fresh:
                target = fresh[0][0]
            elif "back to search" in clickables and len(self._searches(view)) < 3:
                return "click_action", {"value": "back to search"}, "Nothing fits; search again."
            elif asins:
                target = asins[0]
            else:
                return "click_action", {"value": "back to search"}, "No results; search again."
        return "click_action", {"value": target.lower()}, "This product looks right."

    def _searches(self, view: _View) -> list[str]:
        return [a for a in view.actions if a.startswith("search[")]

    def _since_product(self, view: _View) -> list[str]:
        """Executed actions since the current product was opened."""
        for j in range(len(view.actions) - 1, -1, -1):
            a = view.actions[j]
            if a.startswith("click[") and ASIN_RE.match(a[len("click["):-1].upper()):
                return view.actions[j + 1:]
        return []

    def _on_item(self, view: _View, standing: set[str], followed: set[str]):
        clickables = view.clickables
        since = self._since_product(view)
        visits = self._visits(view)
        current = visits[-1] if visits else ""
        price = re.search(r"Price: \$([\d.]+)", view.obs)
        price = float(price.group(1)) if price else 0.0
        if "budget" in followed and price > self.goal["price_upper"]:
            return "click_action", {"value": "< prev"}, "This one is over budget; going back."
        if self.modes["loop"] and "loop" not in followed and "buy" not in followed \
                and len(self._searches(view)) < self.modes["loop"]:
            return "click_action", {"value": "back to search"}, "Let me search again to compare."
        wants_options = (self.modes["options"] != "skip" or "options" in standing
                         or "options" in followed)
        selected = {a[len("click["):-1] for a in since if a.startswith("click[")}
        missing_value = False
        todo = []
        for value in self.required:
            hit = next((c for c in clickables if _option_match(value, c)), None)
            if hit is None:
                missing_value = True
            elif hit not in selected:
                todo.append(hit)
        if missing_value and current != self.goal_asin and (
                not self.modes["no_variant_check"] or "back" in followed):
            return "click_action", {"value": "< prev"}, "The required option is not offered; going back."
        if wants_options and todo:
            if self.modes["options"] == "partial" and "options" not in followed and \
                    "options" not in standing and len(self.required) - len(todo) >= 1:
                todo = []
            if todo:
                return "click_action", {"value": todo[0]}, f"Selecting {todo[0]}."
        if "options" in followed and not todo and not selected:
            # told to select options the goal does not constrain: picks the first value shown
            first = next((c for c in clickables[6:]), None)
            if first is not None:
                return "click_action", {"value": first}, f"Selecting {first}."
        if "back" in followed and (missing_value or view.blocked):
            # told to go back (and nothing left to select here)
            return "click_action", {"value": "< prev"}, "Going back to the results."
        if self.modes["peek"] and not any(a in ("click[description]", "click[features]") for a in since):
            return "click_action", {"value": "features"}, "Let me check the features."
        return "click_action", {"value": "buy now"}, "Buying this product."

    def _invalid_click(self, view: _View, n_msgs: int):
        page = view.page
        if page == "results" and view.result_rows():
            value = view.result_rows()[0][1]            # the title instead of the ASIN
        elif page == "item":
            value = "color" if self._draw("invalid_kind", n_msgs) < 0.5 else "Add to Cart"
        else:
            value = "Next Page"
        return "click_action", {"value": value}, f"Clicking {value}."
