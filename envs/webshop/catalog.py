"""The substitute's seeded synthetic product catalog, grounded in the real instruction texts.

For every parsed instruction (`goals.py`) the catalog holds the goal product (type, attributes and
option values of the instruction, price within budget) plus near-duplicate distractors that make
search results realistic: one lacks a goal attribute, one lacks the goal's option values, one is
over budget, one is a different product type with the same attributes. Records use the field
names of the real WebShop items (`asin`, `Title`, `Price`, `query`, `name`, `category`,
`product_category`, `Attributes`, `options`; `BulletPoints`/`Description` are generated on demand
by `details()`). Everything is a pure function of (catalog_seed, instruction index): the same seed
gives the same catalog in any process. The catalog is built once per process and seed (~2 s).
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import random
import re

from envs.webshop import goals as goals_mod
from envs.webshop.search import BM25Index

PRICE_RANGE = [10.0 * i for i in range(1, 100)]    # upstream goal.py

SUBCATEGORIES = {
    "apparel": ("Women", "Men", "Novelty & More", "Shoes"),
    "beauty": ("Hair Care", "Skin Care", "Makeup", "Oral Care", "Fragrance"),
    "food": ("Snack Foods", "Beverages", "Pantry Staples", "Candy & Chocolate"),
    "tech": ("Accessories & Supplies", "Computers & Accessories", "Camera & Photo", "Headphones"),
    "home": ("Furniture", "Bedding", "Home Décor", "Kitchen & Dining", "Lighting"),
    "general": ("Tools & Home Improvement", "Sports & Outdoors", "Office Products", "Toys & Games"),
}
GENERAL_TOP = "Everything Else"

FILLER_ATTRIBUTES = {
    "apparel": ["cotton blend", "stretch fabric", "pull on closure", "tagless label", "breathable"],
    "beauty": ["travel friendly", "dermatologist tested", "lightweight formula", "salon grade"],
    "food": ["resealable pack", "small batch", "kosher certified", "family size"],
    "tech": ["plug and play", "compact design", "overload protection", "braided jacket"],
    "home": ["modern style", "rust resistant", "scratch resistant", "space saver"],
    "general": ["durable build", "compact design", "lightweight", "multi purpose"],
}
OPTION_POOLS = {
    "color": ["black", "white", "red", "blue", "green", "pink", "purple",
                                     "grey", "brown", "navy", "beige", "yellow", "orange", "ivory",
                                     "khaki", "gold", "silver", "teal", "wine", "coral"],
    "size": ["small", "medium", "large", "x-large", "xx-large"],
    "flavor": ["original", "vanilla", "chocolate", "strawberry", "caramel", "mint", "honey",
               "cinnamon", "lemon", "berry", "coconut", "peanut butter", "sea salt"],
    "scent": ["lavender", "unscented", "vanilla", "rose", "citrus", "ocean breeze", "sandalwood",
              "eucalyptus", "coconut", "fresh linen"],
    "style": ["classic", "modern", "style a", "style b", "deluxe", "standard"],
}
_SYLLABLES = ("ka ve lo ra mi zen to bel no va cor lux fi ne sa tri pe qu dor an el ix ma ro "
              "sun bri gal ter mo ly").split()


def _top_category(task_type: str) -> str:
    return next((top for name, top, _ in goals_mod.TASK_TYPES if name == task_type), GENERAL_TOP)


_ASIN_CHARS = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"


def _brand(bits: int) -> str:
    n = 2 + bits % 2
    bits //= 2
    out = []
    for _ in range(n):
        out.append(_SYLLABLES[bits % len(_SYLLABLES)])
        bits //= len(_SYLLABLES)
    return "".join(out).capitalize()


def _asin(bits: int) -> str:
    out = []
    for _ in range(8):
        out.append(_ASIN_CHARS[bits % 34])
        bits //= 34
    return "B0" + "".join(out)


def _other_values(kind: str, value: str, rng: random.Random, n: int) -> list[str]:
    """`n` plausible option values of the same kind as `value`, all different from it."""
    m = re.fullmatch(r"(pack of )?(\d+(?:\.\d+)?)(.*)", value)
    if kind == "size" and m:
        prefix, num, unit = m.group(1) or "", float(m.group(2)), m.group(3)
        fmt = (lambda x: f"{x:g}")
        if not prefix and not unit.strip() and num <= 20:      # shoe/dress sizes: nearby steps
            vals = [f"{fmt(num + d)}{unit}" for d in (-2, -1, -0.5, 0.5, 1, 2) if num + d > 0]
        else:
            steps = [0.5, 0.75, 1.25, 1.5, 2.0, 3.0] if num > 2 else [2.0, 3.0, 4.0, 6.0, 12.0]
            vals = [f"{prefix}{fmt(max(0.5, round(num * s, 1) if '.' in m.group(2) else round(num * s)))}{unit}"
                    for s in steps]
    elif kind == "size" and value in goals_mod.LETTER_SIZES:
        vals = list(goals_mod.LETTER_SIZES[:9])
    else:
        vals = list(OPTION_POOLS.get(kind, OPTION_POOLS["style"]))
    vals = [v for v in dict.fromkeys(vals) if v != value and value not in v and v not in value]
    rng.shuffle(vals)
    return vals[:n]


@functools.lru_cache(maxsize=65536)
def _title_case(text: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in text.split())


@dataclasses.dataclass(frozen=True)
class Goal:
    """A WebShop goal with the fields of upstream `get_human_goals`."""
    index: int                  # position in goal order (after the seed-233 shuffle)
    file_index: int             # position in human_goals.json
    asin: str
    instruction_text: str       # instruction + ", and price lower than X dollars"
    attributes: tuple
    goal_options: dict          # option kind -> value
    price_upper: float
    query: str
    name: str
    category: str
    product_category: str

    def as_dict(self) -> dict:
        return {"asin": self.asin, "instruction_text": self.instruction_text,
                "attributes": list(self.attributes), "goal_options": dict(self.goal_options),
                "price_upper": self.price_upper, "query": self.query, "name": self.name,
                "category": self.category, "product_category": self.product_category}


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What the eager pass fixes about a product (cheap); the rest is built on first access."""
    goal_file_index: int
    kind: str                   # goal | attribute | option | price | type
    asin: str
    brand: str
    price: float
    type_source: int            # file index whose parsed type/modifiers the product uses
    attributes: tuple
    drop_options: bool          # the product lacks the goal's option values
    title: str


class Catalog:
    """All products for all goals, a BM25 index over them, and the goal list in goal order.

    The eager pass (parse, plan, index) takes ~2 s for the 12,087 instructions; full product
    records (option values, bullet points) are materialised on first access and cached.
    """

    def __init__(self, catalog_seed: int, goal_seed: int):
        self.catalog_seed = catalog_seed
        self.goal_seed = goal_seed
        texts = goals_mod.instructions()
        self.parsed = [goals_mod.parse_instruction(t) for t in texts]
        self.types = [goals_mod.product_type(p) for p in self.parsed]
        by_type: dict[str, list[int]] = {}
        for i, t in enumerate(self.types):
            by_type.setdefault(t, []).append(i)
        self._plans: list[_Plan] = []
        self._records: dict[int, dict] = {}
        self.pid_by_asin: dict[str, int] = {}
        self._first_pid: list[int] = []
        goal_fields = [self._plan_goal(i, texts[i], by_type) for i in range(len(texts))]
        self.index = BM25Index([self._search_text(p) for p in self._plans])
        order = goals_mod.goal_order(goal_seed)
        self.goals = [Goal(index=k, file_index=fi, **goal_fields[fi]) for k, fi in enumerate(order)]

    # --- eager plan --------------------------------------------------------------------------
    def _add(self, plan: _Plan) -> None:
        asin = plan.asin
        while asin in self.pid_by_asin:             # astronomically rare; keep ASINs unique
            asin = asin[:-1] + _ASIN_CHARS[(_ASIN_CHARS.index(asin[-1]) + 1) % 34]
        if asin != plan.asin:
            plan = dataclasses.replace(plan, asin=asin)
        self.pid_by_asin[asin] = len(self._plans)
        self._plans.append(plan)

    def _plan_goal(self, i: int, raw: str, by_type: dict) -> dict:
        rng = random.Random(f"webshop-catalog:{self.catalog_seed}:{i}")
        p, task_type = self.parsed[i], self.types[i]
        price = round(int(rng.uniform(4.0, 4.0 + 35.0 * rng.choice((1, 1, 2, 3, 5))))
                      + rng.choice((0.99, 0.49, 0.0, 0.95)), 2)
        first = int(price // 10) + 1                            # first ten above the price
        price_range = PRICE_RANGE[first - 1:first + 3]
        price_upper = sorted(rng.sample(price_range, 2))[1]     # upstream get_human_goals
        fillers = FILLER_ATTRIBUTES[task_type]
        goal_attrs = tuple(p.attributes)
        missing = [a for a in fillers if not any(g in a or a in g for g in goal_attrs)]
        filler = fillers[i % len(fillers)]
        extra = () if filler in missing[:2] else (filler,)
        same = i
        other = by_type[task_type][rng.randrange(len(by_type[task_type]))]
        specs = [
            ("goal", price, same, goal_attrs + extra, False, ()),
            # Distractors: each misses exactly one part of the goal.
            ("attribute", round(price * rng.uniform(0.7, 1.0), 2), same,
             goal_attrs[1:] + tuple(missing[:1]), False, goal_attrs[:1]),
            ("option", round(price * rng.uniform(0.8, 1.05), 2), same,
             goal_attrs + tuple(missing[1:2]), True, ()) if p.options else
            ("attribute", round(price * rng.uniform(0.8, 1.05), 2), same,
             tuple(missing[1:3]), False, goal_attrs),
            ("price", round(price_upper * rng.uniform(1.15, 1.8), 2), same, goal_attrs, False, ()),
        ]
        if self.parsed[other].type_phrase != p.type_phrase:
            specs.append(("type", round(price * rng.uniform(0.7, 1.0), 2), other, goal_attrs, False, ()))
        first = len(self._plans)
        self._first_pid.append(first)
        for kind, pr, src, attrs, drop, exclude in specs:
            bits = rng.getrandbits(64)
            brand = _brand(bits >> 44)
            # A different product type is titled as what it is (its own source's attributes);
            # it still lists the goal's attributes, so keyword search finds it.
            title_attrs = self.parsed[src].attributes if kind == "type" else attrs
            self._add(_Plan(goal_file_index=i, kind=kind, asin=_asin(bits), brand=brand,
                            price=pr, type_source=src, attributes=attrs, drop_options=drop,
                            title=self._title(brand, self.parsed[src], title_attrs, exclude)))
        goal_plan = self._plans[first]
        return {
            "asin": goal_plan.asin,
            "instruction_text": raw.strip().strip(".") + f", and price lower than {price_upper:.2f} dollars",
            "attributes": goal_attrs, "goal_options": dict(p.options), "price_upper": price_upper,
            "query": p.type_phrase, "name": goal_plan.title,
            "category": task_type, "product_category": self._product_category(goal_plan),
        }

    @staticmethod
    def _title(brand: str, src: goals_mod.ParsedGoal, attributes: tuple, exclude: tuple) -> str:
        # A distractor that lacks an attribute must not mention it anywhere (reward checks text).
        mods = [w for w in src.modifiers if not any(w in e.split() for e in exclude)]
        title = " ".join([brand] + [_title_case(w) for w in mods] + [_title_case(src.type_phrase)])
        if attributes:
            title += " - " + ", ".join(_title_case(a) for a in attributes[:2])
        return title

    def _product_category(self, plan: _Plan) -> str:
        type_phrase = self.parsed[plan.type_source].type_phrase
        task_type = self.types[plan.goal_file_index]
        subs = SUBCATEGORIES[task_type]
        sub = subs[sum(map(ord, type_phrase)) % len(subs)]
        return f"{_top_category(task_type)} › {sub} › {_title_case(type_phrase)}"

    def _search_text(self, plan: _Plan) -> str:
        src = self.parsed[plan.type_source]
        goal_opts = "" if plan.drop_options else " ".join(self.parsed[plan.goal_file_index].options.values())
        # the title already holds the brand, type phrase and first two attributes
        return " ".join((plan.title, " ".join(plan.attributes[2:]), goal_opts))

    # --- lazy records ----------------------------------------------------------------------
    def product(self, pid: int) -> dict:
        """The full product record (WebShop item field names), built on first access."""
        rec = self._records.get(pid)
        if rec is None:
            rec = self._records[pid] = self._materialize(pid)
        return rec

    def by_asin(self, asin: str) -> dict | None:
        pid = self.pid_by_asin.get(asin.upper())
        return None if pid is None else self.product(pid)

    def _materialize(self, pid: int) -> dict:
        plan = self._plans[pid]
        rng = random.Random(f"webshop-product:{self.catalog_seed}:{pid}:{plan.asin}")
        goal = self.parsed[plan.goal_file_index]
        task_type = self.types[plan.goal_file_index]
        options: dict[str, list[str]] = {}
        for kind, val in goal.options.items():
            others = _other_values(kind, val, rng, rng.randint(2, 5))
            values = others if plan.drop_options else others + [val]
            rng.shuffle(values)
            options[kind] = values
        if not options and rng.random() < 0.5:      # unrequired option groups exist too
            kind = "size" if task_type in ("apparel", "food", "beauty") else "color"
            options[kind] = _other_values(kind, "", rng, rng.randint(2, 4)) or ["standard"]
        title = plan.title
        type_phrase = self.parsed[plan.type_source].type_phrase
        attrs = list(plan.attributes)
        bullets = [f"{_title_case(a)}: this {type_phrase} is designed to be {a}." for a in attrs]
        bullets.append(f"Package includes 1 {type_phrase}; "
                       f"{rng.choice(('30-day returns', '1-year warranty', 'ships in 2 days'))}.")
        return {
            "asin": plan.asin, "Title": title, "name": title, "Price": plan.price,
            "query": type_phrase, "category": task_type,
            "product_category": self._product_category(plan), "Attributes": attrs,
            "options": options, "BulletPoints": bullets,
            "Description": f"{title}. A {type_phrase} by {plan.brand}. " + " ".join(f"It is {a}." for a in attrs),
            "Reviews": [], "Rating": "N.A.", "kind": plan.kind, "goal_file_index": plan.goal_file_index,
        }

    # --- queries ---------------------------------------------------------------------------
    def search(self, keywords: str, top_n: int = 50) -> list[dict]:
        return [self.product(i) for i in self.index.top(keywords, top_n)]

    def _pids_of_goal(self, goal: Goal) -> range:
        start = self._first_pid[goal.file_index]
        end = self._first_pid[goal.file_index + 1] if goal.file_index + 1 < len(self._first_pid) else len(self._plans)
        return range(start, end)

    def products_of_goal(self, goal: Goal) -> list[dict]:
        """The goal product and its distractors (full records)."""
        return [self.product(pid) for pid in self._pids_of_goal(goal)]

    def listing_of_goal(self, goal: Goal) -> list[dict]:
        """asin / kind / Title / Price of the goal product and its distractors, without
        materialising the records (the scripted agent's oracle)."""
        return [{"asin": p.asin, "kind": p.kind, "Title": p.title, "Price": p.price}
                for p in (self._plans[pid] for pid in self._pids_of_goal(goal))]

    @functools.cached_property
    def prices_sha256(self) -> str:
        """SHA-256 of the whole catalog's asin -> price map (the manifest's product_prices_sha256)."""
        prices = sorted((p.asin, p.price) for p in self._plans)
        return hashlib.sha256(json.dumps(prices, separators=(",", ":")).encode()).hexdigest()

    def __len__(self) -> int:
        return len(self._plans)


@functools.lru_cache(maxsize=2)
def get_catalog(catalog_seed: int = 0, goal_seed: int = 233) -> Catalog:
    """The catalog for a seed, built on first use and then shared within the process."""
    return Catalog(catalog_seed, goal_seed)
