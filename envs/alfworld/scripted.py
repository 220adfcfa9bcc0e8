"""Scripted ALFWorld target: a seeded simulator of a small LLM household agent.

What it knows. From `Task.oracle["walkthrough"]` (the game's stored expert plan) it takes the
*plan skeleton*: where the first target instances lie, which appliance transforms them, which
receptacle is the destination and where the desklamp is. Everything else comes from the messages
it is shown: observations (parsed with the same surface rules as the hook ctx), the AVAILABLE
ACTIONS list, and harness messages. It never sees hook ctx or patch state.

Competent behaviour. Search a few receptacles (seeded count) before heading to a known target
location, take a visible target, open closed receptacles, transform it (heat/cool/clean) with the
plan's appliance, carry it to the destination and put it there; pick_two repeats for a second
instance; look_at takes the object to the lamp and uses it.

Failure profile (rates at `skill=0.6`; each scales with (1 - skill) / 0.4, so skill=1 is flawless):
  per turn   invalid text 5% (no instance number, wrong verb, free text: usually "Nothing happens.",
             near misses get snapped to a command), repeat the previous action 4% (loops; three
             identical actions end the episode), wander to a random receptacle 5%, overlook a
             visible target while searching 25%, reply with text and no tool call 1%.
  per episode  put before transforming (believes heat/cool/clean is not needed) 50% of transform
             tasks; pick_two: stop after the first object 50%; wrong object (takes another visible
             object type as "the target") 12%; look_at: uses the lamp without holding the object
             35%; forget to open a closed receptacle before taking 30%; give up at a random turn
             (15-40) 10%.
  distraction 30%: a followed hint that tells it nothing new (a repeated or generic message)
             makes it re-orient with "inventory" instead of acting (a wasted step).
  After it believes the task is done (e.g. put before transforming) it idles with the same
  "look"/"inventory" action, which AgentBench's three-identical-actions rule turns into an early
  failure unless a harness message gets it going again.

Harness messages. Every user message after the first and every tool reply without an AVAILABLE
ACTIONS list (a blocked action) is a hint; so are system-prompt tips and tool-description hints
(standing advice, followed with half the probability). Each hint is followed with probability
`hint_follow_prob` (seeded per message); a followed hint changes the agent's beliefs and next
choice: it names the transform verb -> transform before placing; "another/second/two" -> fetch
a second object; "wrong/does not match" -> drop the wrong object; take/hold hints in look_at ->
take the object first; "stuck/repeat/loop/different/explore" -> stop idling and search again;
"take ... <target>" / "put ... <destination>" -> do that admissible action now; an admissible
command quoted verbatim -> do it next. A blocked action is not retried on the next turn when the
block is followed.

Deterministic given (seed, task, messages): beliefs are recomputed by replaying the messages, and
every random draw uses an RNG keyed by (seed, task, purpose, turn or message index).
"""
from __future__ import annotations

import hashlib
import json
import random
import re

from envs.alfworld.world import Tracker, type_of
from envs.base import Task
from envs.scripted import REFERENCE_SKILL, behaviour, setting

TOOL = "take_action"
SUFFIX = " AVAILABLE ACTIONS: "
VERBS = {"pick_heat_then_place": "heat", "pick_cool_then_place": "cool", "pick_clean_then_place": "clean"}

# Rates at skill 0.6 (see module doc).
BASE_RATES = {
    "invalid": 0.05, "repeat": 0.04, "wander": 0.05, "miss_visible": 0.25, "no_tool": 0.01,
    "skip_transform": 0.5, "stop_after_one": 0.5, "wrong_object": 0.12, "lamp_first": 0.35,
    "forget_open": 0.3, "give_up": 0.10, "distract": 0.3,
}
# Tips in the system prompt and tool hints are standing advice, followed half as often as a
# message that arrives at the moment it applies.
STANDING_HINT_WEIGHT = 0.5
TIPS_HEADER = "Some tips that may help for this task:"
SEARCH_MAX = 4              # receptacles searched before going to a known location: 0..SEARCH_MAX

_HINT_WORDS = {
    "second": ("another", "second", "two", "both", "more", "next target", "remaining"),
    "wrong": ("wrong", "does not match", "not match", "substitute", "only that target", "non-target",
              "requested target", "different object", "not the target"),
    "resume": ("stuck", "loop", "repeat", "same action", "different", "explore", "search",
               "look for", "find", "unvisited"),
    "hold": ("take", "hold", "carry", "pick"),
}


def _rng(*key) -> random.Random:
    digest = hashlib.sha256("|".join(str(k) for k in key).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class _Plan:
    """The plan skeleton read from the walkthrough."""

    def __init__(self, task: Task):
        p = task.payload
        self.task_type = p.get("task_type", "")
        self.target = p.get("target_type", "")
        self.dest_type = p.get("destination_type", "")
        self.verb = VERBS.get(self.task_type, "")
        self.count = 2 if self.task_type == "pick_two_obj" else 1
        self.sources: list[str] = []          # receptacles of the walkthrough's takes, in order
        self.appliance = ""
        self.dest = ""
        self.lamp = ""
        self.lamp_location = ""
        location = ""
        for step in task.oracle.get("walkthrough") or []:
            if m := re.match(r"go to (.+)$", step):
                location = m.group(1)
            elif m := re.match(r"take .+? from (.+)$", step):
                self.sources.append(m.group(1))
            elif m := re.match(r"(?:heat|cool|clean) .+? with (.+)$", step):
                self.appliance = m.group(1)
            elif m := re.match(r"(?:move|put) .+? (?:to|in/on) (.+)$", step):
                self.dest = self.dest or m.group(1)
            elif m := re.match(r"use (.+)$", step):
                self.lamp, self.lamp_location = m.group(1), location


class _Beliefs:
    """What the agent believes after reading the messages so far."""

    def __init__(self, plan: _Plan, flags: dict):
        self.tracker: Tracker | None = None
        self.admissible: list[str] = []
        self.receptacles: list[str] = []
        self.turn = 0                          # assistant messages so far
        self.my_actions: list[str] = []
        self.last_observation = ""
        self.skip_transform = flags["skip_transform"]
        self.count = 1 if flags["stop_after_one"] else plan.count
        self.wrong_object = flags["wrong_object"]
        self.lamp_first = flags["lamp_first"]
        self.forget_open = flags["forget_open"]
        self.give_up_turn = flags["give_up_turn"]
        self.idle_cleared_at = -1              # a followed "resume" hint ends idling from here
        self.suggested = ""                    # action a followed hint asked for (next turn only)
        self.avoid = ""                        # a blocked action not to retry next turn
        self.distracted = False                # a followed hint said nothing new this turn
        self.my_placed: set[str] = set()       # objects this agent put at a destination-type receptacle
        self.lamp_used = False
        self.first_pick = ""                   # type of the first object picked up
        self.tried_closed_take = False


class ScriptedAgent:
    def __init__(self, task: Task, seed: int, config):
        self.task, self.seed = task, int(seed)
        self.rates, _, self.hint_follow_prob = behaviour(config, BASE_RATES, "alfworld_rates")
        skill = float(setting(config, "skill", REFERENCE_SKILL))
        self.name = f"scripted-alfworld(skill={skill:g},hint={self.hint_follow_prob:g})"
        self.plan = _Plan(task)
        self.key = (self.seed, task.split, task.task_id, task.payload.get("game", ""))
        r = _rng(*self.key, "episode")
        rate = self.rates
        self.flags = {
            "skip_transform": bool(self.plan.verb) and r.random() < rate["skip_transform"],
            "stop_after_one": self.plan.count == 2 and r.random() < rate["stop_after_one"],
            "wrong_object": r.random() < rate["wrong_object"],
            "lamp_first": self.plan.task_type == "look_at_obj" and r.random() < rate["lamp_first"],
            "forget_open": r.random() < rate["forget_open"],
            "give_up_turn": r.randint(15, 40) if r.random() < rate["give_up"] else None,
        }
        self.search = [r.randint(0, SEARCH_MAX) for _ in range(max(2, self.plan.count))]

    # --- the TargetAgent call ------------------------------------------------------------------
    def chat(self, messages: list[dict], tools: list[dict]) -> dict:
        b = self._replay(messages, tools)
        rng = _rng(*self.key, "turn", b.turn)
        if rng.random() < self.rates["no_tool"]:
            return {"role": "assistant", "content": "I think I should look around the room first."}
        action = self._decide(b, rng)
        call = {"id": f"call_{b.turn}", "type": "function",
                "function": {"name": TOOL, "arguments": json.dumps({"action": action})}}
        return {"role": "assistant", "content": "", "tool_calls": [call]}

    # --- reading the conversation --------------------------------------------------------------
    def _replay(self, messages: list[dict], tools: list[dict]) -> _Beliefs:
        b = _Beliefs(self.plan, self.flags)
        for index, msg in enumerate(messages):
            role, content = msg.get("role"), _content(msg)
            if role == "user" and b.tracker is None and SUFFIX in content:
                obs, b.admissible = _split(content)
                b.tracker = Tracker(obs, self.plan.target, self.plan.dest_type)
                b.receptacles = list(b.tracker.receptacles)
                for key, text in enumerate(_standing_hints(messages, tools)):
                    self._hint(b, text, f"standing{key}", "", weight=STANDING_HINT_WEIGHT)
            elif role == "assistant":
                b.turn += 1
                b.suggested, b.avoid, b.distracted = "", "", False
                action = _call_action(msg)
                if action:
                    b.my_actions.append(action)
                    if re.match(r"take \D+ from ", action):
                        b.tried_closed_take = True
            elif role == "tool" and SUFFIX in content and b.tracker is not None:
                obs, b.admissible = _split(content)
                mine = b.my_actions[-1] if b.my_actions else ""
                b.tracker.update(mine, mine, obs)
                b.last_observation = obs
                if obs.startswith("You pick up the") and not b.first_pick:
                    b.first_pick = type_of(b.tracker.inventory[-1]) if b.tracker.inventory else ""
                if obs.startswith("You turn on the"):
                    b.lamp_used = True
                if m := re.match(r"You (?:put|move) the (.+?) (?:in/on|to) the (.+?)\.", obs):
                    if type_of(m.group(2)) == self.plan.dest_type:
                        b.my_placed.add(m.group(1))
                elif m := re.match(r"You pick up the (.+?)(?: from the .+?)?\.", obs):
                    b.my_placed.discard(m.group(1))
            elif role in ("user", "tool") and b.tracker is not None:
                blocked = b.my_actions[-1] if role == "tool" and b.my_actions else ""
                self._hint(b, content, index, blocked)
        return b

    def _hint(self, b: _Beliefs, text: str, index, blocked: str, weight: float = 1.0) -> None:
        if _rng(*self.key, "hint", index).random() >= self.hint_follow_prob * weight:
            return
        h = " ".join(text.lower().split())
        p = self.plan
        before = (b.skip_transform, b.count, b.wrong_object, b.lamp_first, b.give_up_turn, b.suggested)
        if blocked:
            b.avoid = blocked
        if p.verb and (p.verb in h or "transform" in h):
            b.skip_transform = False
        if p.count == 2 and any(w in h for w in _HINT_WORDS["second"]):
            b.count = 2
        if any(w in h for w in _HINT_WORDS["wrong"]):
            b.wrong_object = False
        if p.task_type == "look_at_obj" and any(w in h for w in _HINT_WORDS["hold"]):
            b.lamp_first = False
        if any(w in h for w in _HINT_WORDS["resume"]):
            b.idle_cleared_at = b.turn
            b.give_up_turn = None
        held = b.tracker.inventory[0] if b.tracker.inventory else ""
        # Only full numbered commands count as quoted ("look" inside "look for the pan" does not).
        quoted = [a for a in b.admissible if a != blocked and re.search(r"\d", a)
                  and re.search(r"(?<![\w/])" + re.escape(a) + r"(?![\w/])", h)]
        if quoted:
            b.suggested = max(quoted, key=len)
        elif "take" in h and p.target in h:
            b.suggested = next((a for a in b.admissible if a.startswith("take ") and
                                type_of(a.split(" from ")[0][5:]) == p.target and
                                b.tracker.placed.get(a.split(" from ")[0][5:]) is None), "")
        elif ("put" in h or "place" in h) and p.dest_type in h and held and type_of(held) == p.target:
            if not p.verb or held in b.tracker.transformed or b.skip_transform:
                b.suggested = next((a for a in b.admissible if a.startswith((f"put {held} ", f"move {held} "))
                                    and type_of(re.split(r" in/on | to ", a)[-1]) == p.dest_type), "")
        if not blocked and isinstance(index, int) and before == (
                b.skip_transform, b.count, b.wrong_object, b.lamp_first, b.give_up_turn, b.suggested):
            b.distracted = True        # read and tried to act on, but it told the agent nothing new

    # --- choosing the next action --------------------------------------------------------------
    def _decide(self, b: _Beliefs, rng: random.Random) -> str:
        if b.tracker is None:
            return "look"
        if b.suggested:
            return b.suggested
        if b.distracted and _rng(*self.key, "distract", b.turn).random() < self.rates["distract"]:
            return "inventory"         # re-orients instead of acting
        if self._idle(b):
            # Believes it is done (or has given up): the same harmless action again.
            return "look" if _rng(*self.key, "idle").random() < 0.5 else "inventory"
        r = rng.random()
        rates = self.rates
        if r < rates["invalid"]:
            return self._malformed(rng)
        r -= rates["invalid"]
        if r < rates["repeat"] and b.my_actions:
            return b.my_actions[-1]
        r -= rates["repeat"]
        if r < rates["wander"]:
            return self._wander(b, rng)
        action = self._competent(b, rng)
        if action == b.avoid:
            return self._wander(b, rng)
        return action

    def _idle(self, b: _Beliefs) -> bool:
        if b.give_up_turn is not None and b.turn >= b.give_up_turn:
            return True
        return self._believes_done(b)

    def _believed_type(self, b: _Beliefs) -> str:
        if b.wrong_object and b.first_pick and b.first_pick != self.plan.target:
            return b.first_pick
        return self.plan.target

    def _believes_done(self, b: _Beliefs) -> bool:
        p, tr = self.plan, b.tracker
        if p.task_type == "look_at_obj":
            holding = any(type_of(o) == self._believed_type(b) for o in tr.inventory)
            return b.lamp_used and (holding or b.lamp_first)
        want = self._believed_type(b)
        placed = [o for o, rec in tr.object_at.items()
                  if type_of(o) == want and type_of(rec) == p.dest_type and o in b.my_placed]
        if p.verb and not b.skip_transform:
            placed = [o for o in placed if o in tr.transformed]
        return len(placed) >= b.count

    def _malformed(self, rng: random.Random) -> str:
        t, d = self.plan.target or "object", self.plan.dest_type or "table"
        return rng.choice([f"take {t}", f"put {t} in {d}", f"pick up the {t}", f"search for {t}",
                           f"go to the {d}", f"find {t}", f"{self.plan.verb or 'examine'} {t}"])

    def _wander(self, b: _Beliefs, rng: random.Random) -> str:
        here = b.tracker.current_location
        options = [r for r in b.receptacles if r != here] or b.receptacles or ["look"]
        choice = rng.choice(options)
        return f"go to {choice}" if choice != "look" else choice

    def _go_or(self, b: _Beliefs, place: str, action: str) -> str:
        """`action` if admissible; else open `place` when standing at it closed; else go there."""
        if action in b.admissible:
            return action
        if b.tracker.current_location == place or f"go to {place}" not in b.admissible:
            if f"open {place}" in b.admissible:
                return f"open {place}"
            return action          # not admissible: a real (wasted) attempt
        return f"go to {place}"

    def _competent(self, b: _Beliefs, rng: random.Random) -> str:
        p, tr = self.plan, b.tracker
        want = self._believed_type(b)
        held = tr.inventory[0] if tr.inventory else ""
        if held and type_of(held) != want:
            # Carrying something that is not (any more) the target: set it down here.
            put = next((a for a in b.admissible if a.startswith((f"put {held} ", f"move {held} "))), "")
            return put or self._wander(b, rng)
        if p.task_type == "look_at_obj":
            lamp_action = f"use {p.lamp}" if p.lamp else next(
                (a for a in b.admissible if a.startswith("use ")), "look")
            if held or (b.lamp_first and not b.lamp_used):
                if lamp_action in b.admissible:
                    return lamp_action
                return f"go to {p.lamp_location}" if p.lamp_location else self._wander(b, rng)
            return self._acquire(b, rng, want)
        if held:
            if p.verb and held not in tr.transformed and not b.skip_transform and p.appliance:
                return self._go_or(b, p.appliance, f"{p.verb} {held} with {p.appliance}")
            dest = p.dest or next((r for r in b.receptacles if type_of(r) == p.dest_type), "")
            put = next((a for a in b.admissible if a.split(" ")[0] in ("put", "move")
                        and a.split(" ")[1:3] == held.split(" ") and a.endswith(" " + dest)),
                       f"put {held} in/on {dest}")
            return self._go_or(b, dest, put)
        return self._acquire(b, rng, want)

    def _acquire(self, b: _Beliefs, rng: random.Random, want: str) -> str:
        p, tr = self.plan, b.tracker
        here = tr.current_location
        done = {o for o in b.my_placed
                if not p.verb or b.skip_transform or o in tr.transformed}
        if b.wrong_object and not b.first_pick:
            other = [a for a in b.admissible if a.startswith("take ") and
                     type_of(a[5:].split(" from ")[0]) != p.target]
            if other:
                return other[0]
        takes = [a for a in b.admissible if a.startswith("take ")
                 and type_of(a[5:].split(" from ")[0]) == want and a[5:].split(" from ")[0] not in done]
        unit = min(len(done), len(self.search) - 1)
        budget = sum(self.search[:unit + 1]) + 3 * unit
        searching = len(tr.visited) < budget
        if takes and not (searching and rng.random() < self.rates["miss_visible"]):
            return takes[0]
        if searching:
            unvisited = [r for r in b.receptacles if r not in tr.visited and r != here]
            if unvisited:
                return f"go to {rng.choice(unvisited)}"
        known = [loc for o, loc in tr.object_at.items()
                 if type_of(o) == want and o not in done and loc != here]
        if known:
            return f"go to {known[-1]}"
        src = p.sources[unit] if unit < len(p.sources) else ""
        if want != p.target or not src:
            return self._wander(b, rng)
        if here != src:
            return f"go to {src}"
        if f"open {src}" in b.admissible:
            if b.forget_open and not b.tried_closed_take:
                return f"take {p.target} from {src}"
            return f"open {src}"
        return self._wander(b, rng)


def _standing_hints(messages: list[dict], tools: list[dict]) -> list[str]:
    """Harness text that is there from the start: system-prompt tips and tool-description hints
    (whatever follows the first blank line of a tool description)."""
    out = []
    system = next((_content(m) for m in messages if m.get("role") == "system"), "")
    if TIPS_HEADER in system:
        out.append(system.split(TIPS_HEADER, 1)[1])
    for tool in tools or []:
        parts = str((tool.get("function") or {}).get("description", "")).split("\n\n", 1)
        if len(parts) == 2 and parts[1].strip():
            out.append(parts[1])
    return out




def _content(msg: dict) -> str:
    content = msg.get("content")
    if isinstance(content, list):   # OpenAI content parts
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def _split(content: str) -> tuple[str, list[str]]:
    head, _, tail = content.partition(SUFFIX)
    obs = head[len("Here is your task. "):] if head.startswith("Here is your task. ") else head
    return obs.strip(), [ln.strip() for ln in tail.splitlines() if ln.strip()]


def _call_action(msg: dict) -> str:
    for call in msg.get("tool_calls") or []:
        fn = call.get("function") or {}
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except (TypeError, ValueError):
            continue
        if isinstance(args, dict) and isinstance(args.get("action"), str):
            return " ".join(args["action"].lower().split())
    return ""
