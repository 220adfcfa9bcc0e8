"""The real WebShop product and goal files in the project's engine (`webshop.data_dir`).

For a user who has the original data (`items_shuffle.json` or its `_1000` variant: the product
list; `items_ins_v2.json`: attributes per ASIN; `items_human_ins.json`: the human instructions
with their ASIN, attributes and options), `RealCatalog` offers what `catalog.Catalog` offers (goals,
search, product records, the identity's price hash), so the env, the site, the reward and the
scripted target run unchanged on it. Records and goals follow upstream `engine.load_products` and
`goal.get_human_goals`: options are the lower-cased customization values, the goal's price cap is
drawn from the next price steps above the product's price, the goals are shuffled with the goal
seed. Deviations: a price range "$a - $b" is fixed per ASIN by a seeded draw (upstream draws per
process), and goal options are keyed by the option group that lists them.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import re

from envs.webshop.catalog import PRICE_RANGE, Goal
from envs.webshop.search import BM25Index

PRODUCT_FILES = ("items_shuffle.json", "items_shuffle_1000.json")
ATTRIBUTE_FILES = ("items_ins_v2.json", "items_ins_v2_1000.json")
HUMAN_FILE = "items_human_ins.json"


def _first(data_dir: str, names: tuple[str, ...]) -> str:
    for name in names:
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"webshop.data_dir {data_dir}: none of {', '.join(names)}")


def _load(path: str):
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: bad JSON ({e})") from None


def price_of(asin: str, pricing) -> float:
    """Upstream's price parse ("$12.99", "$9.99 - $14.99"); a range is drawn once per ASIN; none = 100."""
    values = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", str(pricing or "").replace(",", ""))]
    if not values:
        return 100.0
    if len(values) == 1:
        return values[0]
    lo, hi = sorted(values[:2])
    return round(random.Random(f"webshop-real-price:{asin}").uniform(lo, hi), 2)


def product_record(item: dict, attributes: dict) -> dict:
    """One product in the record format the site and reward read (upstream `load_products`)."""
    asin = str(item["asin"]).upper()
    options = {}
    for group, values in (item.get("customization_options") or {}).items():
        vals = [str(v.get("value", "") if isinstance(v, dict) else v).strip().lower() for v in values or []]
        if vals := [v for v in vals if v]:
            options[str(group).strip().lower()] = vals
    bullets = item.get("small_description") or []
    bullets = [bullets] if isinstance(bullets, str) else [str(b) for b in bullets]
    title = str(item.get("name") or item.get("Title") or "")
    return {
        "asin": asin, "Title": title, "name": title, "Price": price_of(asin, item.get("pricing")),
        "query": str(item.get("query", "")).lower().strip(), "category": str(item.get("category", "")),
        "product_category": str(item.get("product_category", "")), "options": options,
        "Attributes": list((attributes.get(asin) or attributes.get(item["asin"]) or {}).get("attributes") or []),
        "BulletPoints": bullets, "Description": str(item.get("full_description") or ""),
        "Reviews": [], "Rating": str(item.get("average_rating") or "N.A."), "kind": "goal", "goal_file_index": -1,
    }


def _goal_options(values: list[str], product: dict) -> dict:
    out = {}
    for i, raw in enumerate(values):
        value = str(raw).strip().lower()
        group = next((g for g, vals in product["options"].items() if value in vals), f"option_{i}")
        out[group if group not in out else f"{group}_{i}"] = value
    return out


class RealCatalog:
    """The real products, their BM25 index and the human goals in goal order."""

    def __init__(self, data_dir: str, goal_seed: int):
        self.data_dir, self.goal_seed = data_dir, goal_seed
        self.files = {"products": _first(data_dir, PRODUCT_FILES), "attributes": _first(data_dir, ATTRIBUTE_FILES),
                      "goals": _first(data_dir, (HUMAN_FILE,))}
        items, attributes, human = (_load(self.files[k]) for k in ("products", "attributes", "goals"))
        if not isinstance(items, list) or not isinstance(attributes, dict) or not isinstance(human, dict):
            raise ValueError(f"webshop.data_dir {data_dir}: expected a product list, an attribute map and a goal map")
        self._records, self.pid_by_asin = [], {}
        for item in items:
            if not isinstance(item, dict) or not item.get("asin"):
                continue
            rec = product_record(item, attributes)
            if rec["asin"] not in self.pid_by_asin:    # upstream keeps the first of duplicated ASINs
                self.pid_by_asin[rec["asin"]] = len(self._records)
                self._records.append(rec)
        self.index = BM25Index([" ".join([r["Title"], *r["BulletPoints"], *r["Attributes"]]) for r in self._records])
        fields = self._goal_fields(human)
        random.Random(goal_seed).shuffle(fields)        # upstream: random.seed(233); random.shuffle(goals)
        self.goals = [Goal(index=k, file_index=fi, **g) for k, (fi, g) in enumerate(fields)]

    def _goal_fields(self, human: dict) -> list[tuple[int, dict]]:
        out = []
        for rec in self._records:
            for j, ins in enumerate(human.get(rec["asin"]) or human.get(rec["asin"].lower()) or []):
                if not isinstance(ins, dict) or not ins.get("instruction") or "instruction_options" not in ins:
                    continue
                steps = [p for p in PRICE_RANGE if p > rec["Price"]][:4]
                rng = random.Random(f"webshop-real-goal:{self.goal_seed}:{rec['asin']}:{j}")
                price_upper = sorted(rng.sample(steps, 2))[1] if len(steps) >= 2 else 1000000.0
                text = str(ins["instruction"]).strip().strip(".") + f", and price lower than {price_upper:.2f} dollars"
                out.append((len(out), {
                    "asin": rec["asin"], "instruction_text": text,
                    "attributes": tuple(ins.get("instruction_attributes") or ()),
                    "goal_options": _goal_options(ins.get("instruction_options") or [], rec),
                    "price_upper": price_upper, "query": rec["query"], "name": rec["Title"],
                    "category": rec["category"], "product_category": rec["product_category"]}))
        return out

    def product(self, pid: int) -> dict:
        return self._records[pid]

    def by_asin(self, asin: str) -> dict | None:
        pid = self.pid_by_asin.get(str(asin).upper())
        return None if pid is None else self._records[pid]

    def search(self, keywords: str, top_n: int = 50) -> list[dict]:
        return [self._records[i] for i in self.index.top(keywords, top_n)]

    def products_of_goal(self, goal: Goal) -> list[dict]:
        return [self.by_asin(goal.asin)]

    def listing_of_goal(self, goal: Goal) -> list[dict]:
        """The goal product only: the real catalog has no planted distractors."""
        rec = self.by_asin(goal.asin)
        return [{"asin": rec["asin"], "kind": "goal", "Title": rec["Title"], "Price": rec["Price"]}]

    @functools.cached_property
    def prices_sha256(self) -> str:
        prices = sorted((r["asin"], r["Price"]) for r in self._records)
        return hashlib.sha256(json.dumps(prices, separators=(",", ":")).encode()).hexdigest()

    def describe(self) -> str:
        return (f"WebShop REAL data: {len(self._records)} products, {len(self.goals)} human goals from "
                + ", ".join(self.files.values()))

    def __len__(self) -> int:
        return len(self._records)


@functools.lru_cache(maxsize=2)
def get_real_catalog(data_dir: str, goal_seed: int = 233) -> RealCatalog:
    return RealCatalog(data_dir, goal_seed)
