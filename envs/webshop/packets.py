"""WebShop's part of the trace packet: the runtime signals of one trace, from its structured
search/click tool calls (never from scraped page text)."""
from __future__ import annotations

import collections


def _repeats(values: list[str]) -> str:
    counts = collections.Counter(v for v in values if v)
    return ", ".join(f"{v!r} x{n}" for v, n in sorted((v, n) for v, n in counts.items() if n > 1)[:3])


def runtime_signals(actions: list[tuple[str, str]], observations: list[str]) -> list[str]:
    """Searches, clicks, Buy Now clicks and the search terms / click values repeated."""
    searches = [v for n, v in actions if n == "search_action"]
    clicks = [v for n, v in actions if n == "click_action"]
    sig = [f"search_action: {len(searches)}", f"click_action: {len(clicks)}",
           f"buy_now_clicks: {sum(v.strip().lower() == 'buy now' for v in clicks)}"]
    rep_s, rep_c = _repeats([s.lower() for s in searches]), _repeats([c.lower() for c in clicks])
    if rep_s:
        sig.append(f"repeated_search_terms: {rep_s}")
    if rep_c:
        sig.append(f"repeated_click_values: {rep_c}")
    if not (rep_s or rep_c) and _repeats([v for _, v in actions]):
        sig.append(f"repeated_action_values: {_repeats([v for _, v in actions])}")
    return sig
