"""Action strings: the command surface shown to the agent, and mapping free text to a command.

Surface. The shipped games are ALFWorld's 0.4.0 generation, whose grammar says `move O to R` and
answers "You move the O to the R.". AgentBench (and so Harness-R1, whose held-out patches test
`act.startswith('put ')` and `'you put' in obs`) ran the 0.2.2 files, whose command is
`put O in/on R` and whose feedback is "You put the O in/on the R.". With `put_surface` on (the
default) the environment shows the 0.2.2 form everywhere (admissible lists, observations, ctx) and
translates back to the engine's `move` form only when executing. Both `move O to R` and
`put O in R` / `put O on R` are accepted from the agent.

Matching (`process_action`, our own; AgentBench's is BLEU-based and not in the reference repo):
the model's text is normalised (optional "ACTION:" prefix dropped, first line, lowercase,
whitespace collapsed, trailing punctuation removed). An exact admissible match wins. Otherwise
every admissible command is scored by clipped unigram precision times a brevity penalty (BLEU-1)
and the best one is taken if its score is at least `threshold`; ties go to the earlier command.
When the text starts with a known command verb (`take`, `go`, `put`/`move`, ...) only commands
with that verb are candidates, so "take pan 1 from x" never turns into a `put`.
Below the threshold the normalised text is executed as is and the engine answers
"Nothing happens.". AgentBench's cut-off (0.01) snaps almost any text to some command; our default
(0.5) only repairs near misses (a missing instance number, `put … in …` vs `in/on`), so
malformed actions still cost a step as they do for an LLM.
"""
from __future__ import annotations

import math
import re
from collections import Counter

COMMAND_VERBS = {"go", "take", "put", "open", "close", "heat", "cool", "clean", "use", "examine",
                 "look", "inventory", "help", "slice", "toggle"}
_PUT_RE = re.compile(r"^put (.+?) (?:in/on|in|on|into|onto|to) (.+)$")
_MOVE_RE = re.compile(r"^move (.+?) to (.+)$")
_MOVE_OBS_RE = re.compile(r"You move the (.+?) to the (.+?)\.")


def normalise(text: str) -> str:
    text = str(text or "")
    m = re.search(r"action:(.*)", text, flags=re.IGNORECASE)
    if m:
        text = m.group(1)
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    text = " ".join(text.lower().split())
    return text.strip(" .!\"'`")


def to_surface_command(cmd: str, put_surface: bool = True) -> str:
    m = _MOVE_RE.match(cmd)
    return f"put {m.group(1)} in/on {m.group(2)}" if (put_surface and m) else cmd


def to_surface_observation(obs: str, put_surface: bool = True) -> str:
    return _MOVE_OBS_RE.sub(r"You put the \1 in/on the \2.", obs) if put_surface else obs


def to_engine_command(cmd: str) -> str:
    """The engine's form of a surface command (`put O in/on R` -> `move O to R`)."""
    m = _PUT_RE.match(cmd)
    return f"move {m.group(1)} to {m.group(2)}" if m else cmd


def bleu1(candidate: list[str], reference: list[str]) -> float:
    if not candidate or not reference:
        return 0.0
    ref = Counter(reference)
    clipped = sum(min(n, ref[w]) for w, n in Counter(candidate).items())
    precision = clipped / len(candidate)
    brevity = 1.0 if len(candidate) > len(reference) else math.exp(1 - len(reference) / len(candidate))
    return precision * brevity


def process_action(text: str, admissible: list[str], threshold: float = 0.5) -> str:
    """The admissible command closest to the model's `text` (see module doc), else the text."""
    action = normalise(text)
    if not admissible or action in admissible:
        return action
    # Canonical put form before scoring, so "put x in y" compares like "put x in/on y".
    m = _PUT_RE.match(action) or _MOVE_RE.match(action)
    if m and any(a.startswith("put ") for a in admissible):
        action = f"put {m.group(1)} in/on {m.group(2)}"
        if action in admissible:
            return action
    words = action.split()
    verb = "put" if words and words[0] == "move" else (words[0] if words else "")
    if verb in COMMAND_VERBS:
        # A known command verb is kept: only commands with that verb are candidates.
        candidates = [c for c in admissible if c.split()[0] == verb]
    else:
        candidates = admissible
    best, best_score = action, 0.0
    for choice in candidates:
        score = bleu1(words, choice.split())
        if score > best_score:
            best, best_score = choice, score
    return best if best_score >= threshold else action
