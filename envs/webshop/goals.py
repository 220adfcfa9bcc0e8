"""WebShop goals: the 12,087 real instruction texts, parsed into structured goals.

The real goals (`items_human_ins.json`) label each instruction with the purchased product's
attributes and option values; that file is not available here, so every instruction is parsed by
rules into a product type, 1-3 attribute phrases and 0-3 option values, all taken from the
instruction's own words. The catalog (`catalog.py`) then builds a product that satisfies the
parsed goal. Goal order is the upstream one: `random.seed(233); random.shuffle(goals)`; splits by
index as upstream (test 0-499, dev 500-1499, train 1500+).
"""
from __future__ import annotations

import dataclasses
import functools
import json
import pathlib
import random
import re

DATA = pathlib.Path(__file__).resolve().parent / "data" / "human_goals.json"

SPLITS = {"test": (0, 500), "dev": (500, 1500), "train": (1500, None)}

COLORS = sorted("""
black white red blue green yellow pink purple orange brown grey gray navy beige ivory khaki gold
silver rose teal maroon burgundy tan cream coral turquoise olive charcoal lavender mint peach
wine violet aqua multicolor multi clear natural nude camel coffee champagne apricot fuchsia
magenta mustard sky-blue light-blue dark-blue navy-blue royal-blue light-grey dark-grey
light-gray dark-gray rose-gold rose-red hot-pink light-pink dark-green army-green
""".split(), key=len, reverse=True)
COLOR_PHRASES = sorted({c.replace("-", " ") for c in COLORS} | {
    "rose gold", "rose red", "navy blue", "sky blue", "light blue", "dark blue", "royal blue",
    "light grey", "dark grey", "light gray", "dark gray", "hot pink", "light pink", "dark green",
    "army green", "off white", "dark brown", "light brown", "wine red", "space gray", "matte black",
}, key=lambda p: (-len(p), p))

LETTER_SIZES = ["xx-small", "x-small", "small", "medium", "large", "x-large", "xx-large",
                "3x-large", "4x-large", "5x-large", "extra large", "extra small", "one size",
                "twin", "full", "queen", "king", "california king"]
UNITS = ("ounce", "ounces", "oz", "fl oz", "inch", "inches", "ft", "feet", "foot", "mm", "cm",
         "ml", "liter", "lb", "lbs", "pound", "pounds", "count", "pack", "packs", "piece", "pieces",
         "pcs", "pc", "gram", "grams", "g", "kg", "meter", "meters", "watt", "gb", "tb", "yards",
         "centimeter", "millimeter", "sheets", "capsules", "tablets", "bags", "bars")
MATERIALS = ["stainless steel", "cotton", "leather", "wood", "wooden", "glass", "silk", "wool",
             "polyester", "bamboo", "metal", "plastic", "ceramic", "linen", "velvet", "silicone",
             "aluminum", "faux leather", "denim", "nylon", "marble", "iron", "canvas", "rubber"]

# Attribute phrases of the real WebShop vocabulary, most frequent in the instructions first.
ATTRIBUTES = [
    "gluten free", "long lasting", "machine washable", "high quality", "easy to use",
    "easy to install", "easy to clean", "rubber sole", "long sleeve", "heavy duty", "cruelty free",
    "sugar free", "easy to carry", "classic fit", "sensitive skin", "short sleeve",
    "easy to assemble", "super soft", "plant based", "eco friendly", "water resistant",
    "high definition", "paraben free", "slim fit", "dry skin", "high waist", "keto friendly",
    "noise cancelling", "bpa free", "alcohol free", "loose fit", "oil free", "hands free",
    "elastic waist", "relaxed fit", "wall mounted", "regular fit", "easy to apply", "fat free",
    "fluoride free", "fully assembled", "synthetic sole", "comfortable fit", "dairy free",
    "leak proof", "fragrance free", "sulfate free", "dead skin", "button closure", "soy free",
    "nut free", "caffeine free", "easy to prepare", "dust proof", "lead free", "gmo free",
    "non gmo", "leather sole", "grain free", "slip resistant", "lace closure", "hand washable",
    "drawstring closure", "lactose free", "original fit", "water proof", "waterproof",
    "natural ingredients", "high performance", "fast charging", "non slip", "anti slip",
    "quick release", "hair growth", "hair loss", "tummy control", "natural looking", "organic",
    "vegan", "low calorie", "low carb", "ready to eat", "individually wrapped", "quad core",
    "optical zoom", "stainless steel", "tempered glass", "memory foam", "living room",
    "dining room", "bedroom", "birthday party", "easy care", "wireless", "bluetooth",
    "usb port", "portable", "storage space", "space saving", "dishwasher safe", "high speed",
    "non toxic", "anti aging", "fine lines", "dark circles", "travel size", "daily wear",
    "moisture wicking", "quick drying", "polyester cotton", "solid wood", "steel frame",
]
NUMBER_WORDS = {"one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
                "seven": "7", "eight": "8", "nine": "9", "ten": "10", "twelve": "12",
                "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "sixty": "60",
                "seventy": "70", "eighty": "80"}
_DIGIT = re.compile(r"\d")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_ATTR_CANON = {a.replace(" ", ""): a for a in ATTRIBUTES}
_ATTR_RE = re.compile(r"\b(" + "|".join(r"[\s-]*".join(map(re.escape, a.split()))
                                         for a in sorted(ATTRIBUTES, key=len, reverse=True)) + r")\b")
# prefilter for the attribute regex: first words, and the joined form ("longlasting")
_ATTR_FIRST_WORDS = {a.split()[0] for a in ATTRIBUTES} | {a.replace(" ", "") for a in ATTRIBUTES}
_MATERIAL_WORDS = {m.split()[0] for m in MATERIALS}
_AMBIGUOUS_COLORS = {"natural", "clear", "nude", "rose", "wine", "coffee", "cream", "gold", "silver",
                     "peach", "mint", "olive", "camel", "champagne", "multi"}
_COLOR_RE = re.compile(r"\b(" + "|".join(re.escape(p) for p in COLOR_PHRASES
                                         if p not in _AMBIGUOUS_COLORS) + r")\b")
_MATERIAL_RE = re.compile(r"\b(" + "|".join(map(re.escape, sorted(MATERIALS, key=len, reverse=True))) + r")\b")
_UNITS_ALT = "|".join(map(re.escape, sorted(UNITS, key=len, reverse=True)))
_SIZES_ALT = "|".join(map(re.escape, LETTER_SIZES))
_SIZE_RES = (
    re.compile(r"\bsize\s*(?:is|of|:|-|=)?\s*((?:\d+(?:\.\d+)?(?:\s*(?:x|by|\*)\s*\d+(?:\.\d+)?)?"
               r"(?:\s*(?:" + _UNITS_ALT + r")\b)?(?: (?:wide|narrow|long|short|regular|tall))?)"
               r"|(?:" + _SIZES_ALT + r")\b)"),
    re.compile(r"\b(" + "|".join(map(re.escape, LETTER_SIZES[:12])) + r")\b(?! (?:lasting|sleeve|quality|duty))"),
    re.compile(r"\b(?:pack|set|box|case) of (\d+|" + "|".join(NUMBER_WORDS) + r")\b"),
    re.compile(r"\b(\d+(?:\.\d+)?)\s*[- ]?\s*(" + _UNITS_ALT + r")\b"),
)
_COLOR_WORDS = {p.split()[0] for p in COLOR_PHRASES if p not in _AMBIGUOUS_COLORS}
_COLOR_RES = (
    re.compile(r"\bcolou?r\s*(?:is|:|-|=|should be|of|options?)\s*([a-z0-9][a-z0-9\-/&+]*(?: [a-z0-9][a-z0-9\-/&+]*)?)"),
    re.compile(r"\b([a-z0-9][a-z0-9\-]*(?: [a-z0-9][a-z0-9\-]*)?) colou?r(?:ed|s)?\b"),
    re.compile(r"\b(?:the|in|choose|select|a) colou?r ([a-z0-9][a-z0-9\-/&+]*(?: [a-z0-9][a-z0-9\-/&+]*)?)"),
)
_NAMED_RES = {
    kind: (re.compile(r"\b(?:" + pat + r")\s*(?:is|of|:|-)?\s*([a-z][a-z\-&']*(?: [a-z][a-z\-&']*)?)"),
           re.compile(r"\b([a-z][a-z\-&']*(?: [a-z][a-z\-&']*)?) (?:" + pat + r")\b"))
    for kind, pat in (("flavor", r"flavou?rs?|flavored"), ("scent", r"scents?|scented"))
}

OPTION_KINDS = ("color", "size", "flavor", "scent", "style")
STOP = set("""
i im am a an the some me my for to of in on and or with that which who is are be it its this
these those want need needs looking look find get buy purchase would like please also should
must can could you your we our help search searching order ordering prefer choose select them
they their has have having will just one any very really so as at by from but not no was
thats it's is there here what about around under over than less lower price dollars dollar
go going give show bring make kind type item items product products something he she his her
sister brother mom dad wife husband son daughter friend kids while while when where made
""".split())
LEADING_FILLER = {"a", "an", "the", "some", "me", "us", "few", "couple", "pair", "pairs", "set", "sets",
                  "pack", "packs", "box", "bottle", "bottles", "bag", "bags", "of", "buying",
                  "purchasing", "getting", "finding"}
LEAD_RE = re.compile(r"^(?:.*?\b(?:interested in|looking for|look for|searching for|search for|want to buy|want to "
                     r"purchase|want to find|want to get|need to buy|need to find|need to get|"
                     r"would like to buy|would like|want|need|needs|find me|get me|buy me|"
                     r"show me|find|get|buy|purchase|order)\b)\s*")
SPAN_STOP = re.compile(r"\b(?:that|which|who|with|for|in|and|to|it|its|it's|size|color|colour|"
                       r"flavor|flavour|scent|under|less|lower|price|thats|also|should|must|"
                       r"made|from|by|at|is|are|has|have|on)\b|[,.;:!?(]")
NON_TYPE = STOP | set(NUMBER_WORDS) | set(UNITS) | {
    "new", "best", "good", "great", "nice", "small", "large", "big", "little", "long", "short",
    "high", "low", "extra", "super", "easy", "mens", "womens", "men", "women", "kids", "baby",
    "pair", "pairs", "set", "sets", "pack", "packs", "box", "bottle", "bottles", "bag", "bags",
    "x-large", "xx-large", "medium", "free", "proof", "resistant", "friendly", "cute", "soft",
    "organic", "natural", "vegan", "portable", "wireless", "waterproof", "brand",
}


# Category tables: task type -> (top-level Amazon category, keyword regex). Also the ctx task_type.
TASK_TYPES = (
    ("apparel", "Clothing, Shoes & Jewelry",
     r"shirt|t-shirt|dress|jeans|pants|shorts|sweater|hoodie|sweatshirt|jacket|coat|shoe|sneaker|"
     r"boot|sandal|slipper|sock|bra|underwear|brief|legging|skirt|blouse|top|vest|swimsuit|bikini|"
     r"cardigan|pajama|gown|tunic|romper|jumpsuit|hat|cap|scarf|glove|belt|jersey|tee|wig|heel|pump|"
     r"loafer|oxford|clog|flip flop|wedge|polo|trouser|sleeve|waist|fit\b"),
    ("beauty", "Beauty & Personal Care",
     r"hair|shampoo|conditioner|lotion|cream|serum|makeup|lipstick|lip|nail|polish|perfume|"
     r"fragrance|deodorant|toothpaste|toothbrush|teeth|skin|face|facial|mask|eye|brush|soap|"
     r"body wash|moisturizer|sunscreen|beard|shave|razor|cosmetic|eyelash|foundation|powder|mist|"
     r"oil|dye|extension|spray|comb|manicure|tattoo|concealer|bath"),
    ("food", "Grocery & Gourmet Food",
     r"food|snack|chocolate|candy|cookie|coffee|tea|sugar|gluten|flavor|drink|juice|water|milk|"
     r"sauce|spice|seasoning|protein|bar|chips|cracker|nut|almond|rice|pasta|bread|cake|cupcake|"
     r"topper|jerky|cheese|meat|fruit|vegetable|organic|keto|vegan|dairy|syrup|honey|gum|soup|"
     r"fish|tuna|salmon|beef|pork|chicken|cereal|oat|flour|butter|ghee|wafer|gift basket|ounce"),
    ("tech", "Electronics",
     r"cable|charger|phone|tablet|laptop|computer|pc|camera|headphone|earbud|speaker|tv|"
     r"monitor|keyboard|mouse|usb|hdmi|bluetooth|wireless|battery|router|remote|screen protector|"
     r"case cover|projector|microphone|watch|band|adapter|hard drive|ssd|memory|printer|drone|"
     r"electronic|stereo|amplifier|antenna|gps|dvd|console|gaming|coaxial|led"),
    ("home", "Home & Kitchen",
     r"table|chair|desk|sofa|couch|bed|mattress|pillow|blanket|sheet|curtain|rug|lamp|light|"
     r"shelf|cabinet|dresser|ottoman|stool|mirror|frame|wall|kitchen|cookware|pan|pot|knife|"
     r"storage|basket|bin|organizer|towel|shower|bathroom|decor|vase|candle|clock|furniture|"
     r"living room|bedroom|dining|fixture|vanity|stand|rack|hook|cushion|bench|quilt|duvet"),
)
_TYPE_RES = [(name, top, re.compile(r"\b(?:" + rx + r")")) for name, top, rx in TASK_TYPES]
@functools.lru_cache(maxsize=65536)
def classify(text: str) -> str:
    """Coarse product/task type of a text: apparel, beauty, food, tech, home or general."""
    text = text.lower()
    for name, _top, rx in _TYPE_RES:
        if rx.search(text):
            return name
    return "general"



def product_type(parsed: "ParsedGoal") -> str:
    """Category of a parsed goal: from its product type phrase, else from the whole text."""
    kind = classify(parsed.type_phrase)
    return kind if kind != "general" else classify(parsed.instruction)


@dataclasses.dataclass(frozen=True)
class ParsedGoal:
    instruction: str            # the human instruction text (no price clause)
    type_phrase: str            # "hair extension"
    modifiers: tuple            # words of the noun phrase before the type, e.g. ("long", "clip-in")
    attributes: tuple           # 1-3 attribute phrases from the instruction
    options: dict               # option kind -> value, 0-3 entries
    material: str | None


def _norm(text: str) -> str:
    text = text.lower().replace("’", "'").replace("”", '"').replace("“", '"')
    return " ".join(text.split())


def _clean_value(words: list[str]) -> str:
    words = [w for w in words if w]
    while words and words[0] in STOP:
        words = words[1:]
    while words and words[-1] in STOP:
        words = words[:-1]
    return " ".join(words)


def _color_value(raw: str) -> str:
    val = _clean_value(raw.split())
    parts = val.split()
    if len(parts) == 2 and val not in COLOR_PHRASES:
        # Keep one word unless both form a known colour ("rose gold"): "cheetah red" -> "red".
        val = parts[1] if parts[1] in COLORS else parts[0]
    return val


def _find_color(text: str) -> tuple[str | None, tuple[int, int] | None]:
    for rx in _COLOR_RES:
        m = rx.search(text)
        if m:
            val = _color_value(m.group(1))
            if val and val not in STOP and val not in ("size", "same", "any", "options", "option"):
                return val, m.span()
    m = _COLOR_RE.search(text) if _COLOR_WORDS.intersection(_NON_ALNUM.split(text)) else None
    if m:
        return m.group(1), m.span()
    return None, None


def _find_size(text: str) -> tuple[str | None, tuple[int, int] | None]:
    m = _SIZE_RES[0].search(text)
    if m:
        return m.group(1).strip(), m.span()
    m = _SIZE_RES[1].search(text)
    if m:
        val = m.group(1).replace("extra large", "x-large").replace("extra small", "x-small")
        return val, m.span()
    m = _SIZE_RES[2].search(text)
    if m:
        return f"pack of {NUMBER_WORDS.get(m.group(1), m.group(1))}", m.span()
    m = _SIZE_RES[3].search(text)
    if m:
        return f"{m.group(1)} {m.group(2)}", m.span()
    return None, None


def _find_named(text: str, kind: str) -> tuple[str | None, tuple[int, int] | None]:
    after, before = _NAMED_RES[kind]
    for rx, words in ((before, slice(None)), (after, slice(0, 2))):
        m = rx.search(text)
        if m:
            val = _clean_value(m.group(1).split()[words])
            if val and val not in STOP:
                return val, m.span()
    return None, None


def _is_type_word(w: str) -> bool:
    return w not in NON_TYPE and w not in COLORS and not _DIGIT.search(w) and len(w) > 1


def _noun_phrase(text: str, cut_spans: list[tuple[int, int]]) -> list[str]:
    """Words of the first noun phrase after the request verb (option/attribute spans cut out):
    the first stretch between stop words that holds a content word."""
    chars = list(text)
    for a, b in cut_spans:
        for i in range(a, b):
            chars[i] = " " if chars[i] not in ",." else chars[i]
    text = " ".join("".join(chars).split())
    m = LEAD_RE.match(text)
    rest = text[m.end():] if m else text
    candidates = []
    for span in SPAN_STOP.split(rest):
        words = [w.strip("'\"&") for w in span.split()]
        words = [w for w in words if w and w not in LEADING_FILLER]
        content = [w for w in words if _is_type_word(w)]
        if content:
            # Prefer a phrase whose head is a known product word ("classic, ... boat shoes").
            if classify(content[-1]) != "general":
                return words[:8]
            candidates.append(words[:8])
            if len(candidates) == 3:
                break
    return candidates[0] if candidates else []


def parse_instruction(raw: str) -> ParsedGoal:
    text = _norm(raw).rstrip(".")
    cuts: list[tuple[int, int]] = []
    options: dict[str, str] = {}
    for kind, finder in (("color", _find_color), ("size", _find_size),
                         ("flavor", lambda t: _find_named(t, "flavor")),
                         ("scent", lambda t: _find_named(t, "scent"))):
        val, span = finder(text)
        if val and len(options) < 3 and val not in options.values():
            options[kind] = val
            cuts.append(span)
    attributes: list[str] = []
    words = set(_NON_ALNUM.split(text))
    for m in (_ATTR_RE.finditer(text) if _ATTR_FIRST_WORDS & words else ()):
        attr = _ATTR_CANON[m.group(1).replace(" ", "").replace("-", "")]
        if not any(attr in a or a in attr for a in attributes):
            attributes.append(attr)
            cuts.append(m.span())
    mm = _MATERIAL_RE.search(text) if _MATERIAL_WORDS & words else None
    material = mm.group(1) if mm else None
    words = _noun_phrase(text, cuts)
    content = [w for w in words if _is_type_word(w)] or ["item"]
    head = content[-1]
    type_words = [head]
    idx = len(words) - 1 - words[::-1].index(head) if head in words else len(words)
    if idx >= 1 and words[idx - 1] in content and words[idx - 1] not in COLORS:
        type_words.insert(0, words[idx - 1])
    modifiers = tuple(w for w in words[:max(0, idx - len(type_words) + 1)]
                      if w not in STOP and w not in type_words and not re.fullmatch(r"[\d.]+", w))[:3]
    if not attributes:
        # Every real goal has >= 1 attribute: take a descriptive word of the instruction.
        option_words = {w for v in options.values() for w in v.split()}
        extra = [w for w in modifiers if w not in option_words and len(w) > 2] or \
                [w for w in re.findall(r"[a-z][a-z\-]{3,}", text)
                 if w not in STOP and w not in type_words and w not in option_words
                 and w not in UNITS and w not in NUMBER_WORDS]
        attributes.append(extra[0] if extra else type_words[0])
    return ParsedGoal(instruction=text, type_phrase=" ".join(type_words), modifiers=modifiers,
                      attributes=tuple(attributes[:3]), options=options, material=material)


@functools.lru_cache(maxsize=1)
def instructions() -> tuple[str, ...]:
    """The 12,087 human instruction texts in file order."""
    with open(DATA, encoding="utf-8") as f:
        goals = json.load(f)
    if not isinstance(goals, list) or not all(isinstance(g, str) for g in goals):
        raise ValueError(f"{DATA}: expected a JSON list of instruction strings")
    return tuple(goals)


@functools.lru_cache(maxsize=4)
def goal_order(goal_seed: int) -> tuple[int, ...]:
    """File indices in goal order: upstream `random.seed(goal_seed); random.shuffle(goals)`."""
    order = list(range(len(instructions())))
    random.Random(goal_seed).shuffle(order)
    return tuple(order)


def split_range(split: str) -> range:
    if split not in SPLITS:
        raise ValueError(f"unknown WebShop split {split!r}; expected one of {sorted(SPLITS)}")
    start, end = SPLITS[split]
    return range(start, len(instructions()) if end is None else end)
