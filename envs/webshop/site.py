"""The simulated WebShop site: pages, their text ("simple" observation mode, `[SEP]`-joined, as
WebShop's `WebAgentTextEnv` renders `web_agent_site/templates/*.html`), clickables and the
`search[...]` / `click[...]` transitions. One instance per episode.

Pages: search (home) -> results (10 per page of the top 50 BM25 hits) -> item (options, title,
price, Description/Features/Reviews, Buy Now) -> sub-pages; `back to search` and `< prev`
navigate back. An invalid action (search without a search bar, click on a non-clickable) changes
nothing and returns reward 0, as upstream. `click[buy now]` ends the episode with the reward.
"""
from __future__ import annotations

import re

from envs.webshop import reward as reward_mod
from envs.webshop.catalog import Catalog, Goal

SEARCH_RETURN_N = 50
PRODUCT_WINDOW = 10
SEP = " [SEP] "
ACTION_RE = re.compile(r"^\s*(search|click)\[(.*)\]\s*$", re.S)
ITEM_BUTTONS = ["back to search", "< prev", "description", "features", "reviews", "buy now"]
SUB_PAGES = ("description", "features", "reviews")


def parse_action(text: str) -> tuple[str, str] | None:
    m = ACTION_RE.match(text or "")
    return (m.group(1), m.group(2).strip()) if m else None


def _price(p: float) -> str:
    return f"${p:.2f}"


class Site:
    def __init__(self, catalog: Catalog, goal: Goal):
        self.catalog = catalog
        self.goal = goal
        self.instruction = goal.instruction_text
        self.page = "search"            # search | results | item | sub | done
        self.keywords = ""
        self.results: list[dict] = []
        self.page_num = 1
        self.product: dict | None = None
        self.sub_page = ""
        self.options: dict[str, str] = {}   # selected option kind -> value on the current product
        self.purchased: dict | None = None
        self.reward = 0.0
        self.reward_info: dict = {}

    # --- rendering ---------------------------------------------------------------------------
    def observation(self) -> str:
        head = ["Instruction:", self.instruction]
        if self.page == "search":
            return SEP.join(["WebShop"] + head + ["Search"])
        if self.page == "results":
            parts = head + ["Back to Search",
                            f"Page {self.page_num} (Total results: {len(self.results)})"]
            if self.page_num > 1:
                parts.append("< Prev")
            if self.page_num * PRODUCT_WINDOW < len(self.results):
                parts.append("Next >")
            for p in self._window():
                parts += [p["asin"], p["Title"], _price(p["Price"])]
            return SEP.join(parts)
        if self.page == "item":
            p = self.product
            parts = head + ["Back to Search", "< Prev"]
            for kind, values in p["options"].items():
                parts += [kind] + list(values)
            parts += [p["Title"], f"Price: {_price(p['Price'])}", f"Rating: {p['Rating']}",
                      "Description", "Features", "Reviews", "Buy Now"]
            return SEP.join(parts)
        if self.page == "sub":
            p = self.product
            body = {"description": [p["Description"]], "features": list(p["BulletPoints"]),
                    "reviews": list(p["Reviews"])}[self.sub_page]
            return SEP.join(head + ["Back to Search", "< Prev"] + body)
        info = self.reward_info
        return SEP.join(["Thank you for shopping with us!", "Your code:", "None",
                         "Purchased", self.purchased["asin"] if self.purchased else "None",
                         "Reward", "Your score (min 0.0, max 1.0)", f"{self.reward:.2f}",
                         f"Attributes matched: {info.get('n_attr_matched', 0)}/{info.get('n_attr', 0)}",
                         f"Options matched: {info.get('n_opt_matched', 0)}/{info.get('n_opt', 0)}"])

    def available_actions(self) -> dict:
        return {"has_search_bar": self.page == "search", "clickables": self.clickables()}

    def clickables(self) -> list[str]:
        if self.page == "search":
            return ["search"]
        if self.page == "results":
            out = ["back to search"]
            if self.page_num > 1:
                out.append("< prev")
            if self.page_num * PRODUCT_WINDOW < len(self.results):
                out.append("next >")
            return out + [p["asin"].lower() for p in self._window()]
        if self.page == "item":
            out = list(ITEM_BUTTONS)
            for values in self.product["options"].values():
                out += [v.lower() for v in values if v.lower() not in out]
            return out
        if self.page == "sub":
            return ["back to search", "< prev"]
        return []

    def _window(self) -> list[dict]:
        start = (self.page_num - 1) * PRODUCT_WINDOW
        return self.results[start:start + PRODUCT_WINDOW]

    # --- transitions ---------------------------------------------------------------------------
    def step(self, action_text: str) -> tuple[str, float, bool, dict]:
        """Execute `search[...]` / `click[...]`; returns (observation, reward, done, info)."""
        parsed = parse_action(action_text)
        valid = False
        if parsed and self.page != "done":
            kind, arg = parsed
            if kind == "search":
                valid = self.page == "search" and bool(arg.strip())
                if valid:
                    self._search(arg)
            else:
                value = arg.lower()
                valid = value in self.clickables()
                if valid:
                    self._click(value)
        done = self.page == "done"
        return self.observation(), (self.reward if done else 0.0), done, {"valid": valid}

    def _search(self, keywords: str) -> None:
        self.keywords = keywords
        self.results = self.catalog.search(keywords, SEARCH_RETURN_N)
        self.page_num = 1
        self.page = "results"

    def _click(self, value: str) -> None:
        if value == "back to search":
            self.page, self.product, self.options, self.results = "search", None, {}, []
        elif value == "search":
            pass        # the search button needs keywords: only `search[...]` searches
        elif self.page == "results":
            if value == "next >":
                self.page_num += 1
            elif value == "< prev":
                self.page_num -= 1
            else:
                self.product = self.catalog.by_asin(value)
                self.options = {}
                self.page = "item"
        elif self.page == "sub":
            self.page = "item"          # < prev from a sub-page returns to the item
        elif value == "< prev":
            self.page, self.product, self.options = "results", None, {}
        elif value in SUB_PAGES:
            self.page, self.sub_page = "sub", value
        elif value == "buy now":
            self._buy()
        else:
            for kind, values in self.product["options"].items():
                match = next((v for v in values if v.lower() == value), None)
                if match is not None:
                    self.options[kind] = match
                    break

    def _buy(self) -> None:
        p = self.product
        self.purchased = p
        self.reward, self.reward_info = reward_mod.get_reward(p, self.goal.as_dict(), p["Price"], self.options)
        self.reward_info.update(asin=p["asin"], selected_options=dict(self.options))
        self.page = "done"
