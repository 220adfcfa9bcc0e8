"""The original WebShop purchase reward (`web_agent_site/engine/goal.py::get_reward`).

r = r_type * (n_attr_matched + n_option_matched + [price <= price_upper]) / (n_attr + n_opt + 1)

Attribute match: fuzzy `token_set_ratio > 85` against the product's Attributes, else substring of
title / bullet points / description. Option match: `token_set_ratio > 85` against the selected
option values after colour normalisation. r_type in {1, 0.5, 0.1, 0} from query match, category
match and the overlap of title nouns.

Deviation (documented): upstream tags title nouns with spaCy `en_core_web_lg`; the model is not
available offline, so `title_nouns` keeps the content words of a title that are not stop words,
known adjectives, colours, numbers or units. `token_set_ratio` is re-implemented (Indel ratio, as
rapidfuzz/thefuzz compute it).
"""
from __future__ import annotations

import functools
import re

from envs.webshop import goals as goals_mod

# upstream web_agent_site/engine/normalize.py COLOR_SET (subset order matters: first hit wins)
COLOR_SET = [
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue",
    "blush", "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne",
    "charcoal", "cheetah", "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper",
    "coral", "cranberry", "cream", "crystal", "dark", "denim", "eggplant", "elephant", "espresso",
    "fuchsia", "gold", "granite", "grape", "graphite", "grass", "gray", "green", "grey", "heather",
    "indigo", "ivory", "ivy", "khaki", "lavender", "lemon", "leopard", "light", "lilac", "lime",
    "magenta", "maroon", "mauve", "merlot", "metal", "metallic", "mint", "mocha", "multi",
    "mushroom", "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink",
    "plum", "purple", "rainbow", "red", "rose", "royal", "rust", "sand", "sapphire", "silver",
    "skull", "slate", "steel", "stone", "stripe", "taupe", "tan", "teal", "tiger", "turquoise",
    "violet", "walnut", "wheat", "white", "wine", "yellow",
]

_ADJECTIVES = set("""
free easy long short high low super soft natural organic non anti fast quick heavy light dark
classic slim loose regular relaxed comfortable original new best premium large small big mini
extra portable wireless waterproof durable modern vintage cute womens mens women men kids baby
adult hot cold fresh pure real deluxe ultra full half double single multi plus daily wild sweet
""".split())


def _process(s: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", str(s).lower()).split())


def _indel_ratio(a: str, b: str) -> float:
    """100 * (1 - indel_distance / (len(a)+len(b))) = 100 * 2*LCS / (len(a)+len(b))."""
    if not a and not b:
        return 100.0
    if not a or not b:
        return 0.0
    prev = [0] * (len(b) + 1)
    for ca in a:
        cur = [0]
        for j, cb in enumerate(b):
            cur.append(prev[j] + 1 if ca == cb else max(prev[j + 1], cur[j]))
        prev = cur
    return 200.0 * prev[-1] / (len(a) + len(b))


@functools.lru_cache(maxsize=65536)
def token_set_ratio(s1: str, s2: str) -> float:
    t1, t2 = set(_process(s1).split()), set(_process(s2).split())
    if not t1 or not t2:
        return 0.0
    inter = " ".join(sorted(t1 & t2))
    d12 = " ".join(sorted(t1 - t2))
    d21 = " ".join(sorted(t2 - t1))
    if inter and (not d12 or not d21):
        return 100.0
    c12 = (inter + " " + d12).strip()
    c21 = (inter + " " + d21).strip()
    scores = [_indel_ratio(c12, c21)]
    if inter:
        scores += [_indel_ratio(inter, c12), _indel_ratio(inter, c21)]
    return max(scores)


def normalize_color(s: str) -> str:
    for c in COLOR_SET:
        if c in s:
            return c
    return s


@functools.lru_cache(maxsize=65536)
def title_nouns(title: str) -> frozenset:
    """Stand-in for spaCy's NOUN/PROPN tokens of a title (see module doc)."""
    words = re.findall(r"[a-z][a-z\-']*", title.lower())
    return frozenset(w for w in words if len(w) > 1 and w not in goals_mod.STOP
                     and w not in _ADJECTIVES and w not in goals_mod.COLORS
                     and w not in goals_mod.UNITS and w not in goals_mod.NUMBER_WORDS)


def type_reward(product: dict, goal: dict) -> dict:
    query_match = product["query"] == goal["query"]
    pc = {x.strip() for x in product["product_category"].split("›")}
    gc = {x.strip() for x in goal["product_category"].split("›")}
    category_match = len(pc & gc) >= 2
    desired = title_nouns(goal["name"])
    purchased = title_nouns(product["name"])
    title_score = 0.2 if not desired else len(desired & purchased) / len(desired)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match,
            "title_score": title_score}


def attribute_matches(product: dict, goal: dict) -> int:
    text_fields = (product["Title"].lower(), " ".join(product.get("BulletPoints", [])).lower(),
                   product.get("Description", "").lower())
    n = 0
    for g_attr in goal["attributes"]:
        if any(token_set_ratio(p_attr, g_attr) > 85 for p_attr in product["Attributes"]):
            n += 1
        elif any(g_attr in f for f in text_fields):
            n += 1
    return n


def option_matches(selected: list[str], goal_options: list[str]) -> int:
    purchased = [normalize_color(o) for o in selected]
    n = 0
    for g in (normalize_color(o) for o in goal_options):
        if any(token_set_ratio(p, g) > 85 for p in purchased):
            n += 1
    return n


def get_reward(product: dict, goal: dict, price: float, options: dict) -> tuple[float, dict]:
    """(reward, info) for buying `product` at `price` with selected `options` {kind: value}."""
    goal_opts = list(goal["goal_options"].values()) if isinstance(goal["goal_options"], dict) \
        else list(goal["goal_options"])
    rt = type_reward(product, goal)
    r_price = price <= goal["price_upper"] if goal["price_upper"] > 0 else None
    n_attr = attribute_matches(product, goal)
    n_opt = option_matches(list(options.values()), goal_opts)
    total = (n_attr + n_opt + bool(r_price)) / (len(goal["attributes"]) + len(goal_opts) + 1)
    reward = total * rt["r_type"]
    info = dict(rt, r_price=r_price, n_attr_matched=n_attr, n_attr=len(goal["attributes"]),
                n_opt_matched=n_opt, n_opt=len(goal_opts))
    return reward, info
