"""Episode trackers behind the ALFWorld hook ctx (reference spec §4.2 `post_step_monitor`).

Everything here is read off the surface observations the agent also sees (never the PDDL state):
where the agent is, what it carries, where each object was last seen, which receptacles were
visited, what was transformed, which target objects were placed at a destination-type receptacle,
where a desklamp is; plus histories and the loop/invalid counters behind `state` and `predicates`.
"""
from __future__ import annotations

import re

HISTORY = 5                 # entries kept in ctx.history.* and the window of nothing_happens_count
_SEE_RE = re.compile(r"you see (.+?)\.(?:\s|$)", re.IGNORECASE)
_ARRIVE_RE = re.compile(r"^You arrive at (.+?)\.")
_OPEN_RE = re.compile(r"^You open the (.+?)\.")
_CLOSE_RE = re.compile(r"^You close the (.+?)\.")
_PICK_RE = re.compile(r"You pick up the (.+?)(?: from the (.+?))?\.")
_PUT_RE = re.compile(r"You (?:put|move) the (.+?) (?:in/on|to|in|on) the (.+?)\.")
_TRANSFORM_RE = re.compile(r"^You (heat|cool|clean) the (.+?) using the (.+?)\.")
_LAMP_RE = re.compile(r"^You turn on the (.+?)\.")


def type_of(name: str) -> str:
    """`pan 1` -> `pan`."""
    return re.sub(r"\s+\d+$", "", name.strip())


def seen_items(text: str) -> list[str]:
    """Instances listed after "you see" ("a pan 1, a cup 2, and a fork 1")."""
    out = []
    for m in _SEE_RE.finditer(text):
        body = m.group(1)
        if body.strip() == "nothing":
            continue
        for part in re.split(r",\s*(?:and\s+)?|\s+and\s+", body):
            part = re.sub(r"^(?:an?|the)\s+", "", part.strip())
            if re.search(r"\d+$", part):
                out.append(part)
    return out


def trailing_run(values: list) -> int:
    if not values:
        return 0
    n = 1
    while n < len(values) and values[-1 - n] == values[-1]:
        n += 1
    return n


class Tracker:
    def __init__(self, first_observation: str, target_type: str, destination_type: str):
        self.target_type, self.destination_type = target_type, destination_type
        self.receptacles = seen_items(first_observation)
        self.current_location = ""
        self.inventory: list[str] = []
        self.object_at: dict[str, str] = {}
        self.visited: list[str] = []
        self.opened: set[str] = set()
        self.transformed: dict[str, str] = {}       # object -> verb
        self.placed: dict[str, str] = {}            # target object -> destination receptacle
        self.lamp_location = ""
        self.actions: list[str] = []                # final (executed) actions
        self.raw_actions: list[str] = []
        self.observations: list[str] = []
        self.invalid_action_count = 0

    # --- updates ------------------------------------------------------------------------------
    def note_invalid(self) -> None:
        """An action that was not admissible (or was blocked by the harness)."""
        self.invalid_action_count += 1

    def update(self, raw: str, action: str, observation: str) -> None:
        self.raw_actions.append(raw)
        self.actions.append(action)
        self.observations.append(observation)
        loc = None
        if m := _ARRIVE_RE.match(observation):
            loc = self.current_location = m.group(1)
            if loc not in self.visited:
                self.visited.append(loc)
        elif m := _OPEN_RE.match(observation):
            loc = m.group(1)
            self.opened.add(loc)
        elif m := _CLOSE_RE.match(observation):
            self.opened.discard(m.group(1))
        elif m := _PICK_RE.search(observation):
            obj = m.group(1)
            if obj not in self.inventory:
                self.inventory.append(obj)
            self.object_at.pop(obj, None)
            self.placed.pop(obj, None)
        elif m := _PUT_RE.search(observation):
            obj, rec = m.group(1), m.group(2)
            if obj in self.inventory:
                self.inventory.remove(obj)
            self.object_at[obj] = rec
            if type_of(obj) == self.target_type and type_of(rec) == self.destination_type:
                self.placed[obj] = rec
        elif m := _TRANSFORM_RE.match(observation):
            self.transformed[m.group(2)] = m.group(1)
        elif action.startswith("examine "):
            loc = action[len("examine "):]
        if loc:
            for item in seen_items(observation):
                if item in self.inventory:
                    continue
                self.object_at[item] = loc
                if type_of(item) in ("desklamp", "floorlamp"):
                    self.lamp_location = loc
        if _LAMP_RE.match(observation) and not self.lamp_location:
            self.lamp_location = self.current_location

    # --- views --------------------------------------------------------------------------------
    def state(self, remaining: int) -> dict:
        recent = self.observations[-HISTORY:]
        return {
            "nothing_happens_count": sum("nothing happens" in o.lower() for o in recent),
            "repeated_observation_count": trailing_run(self.observations),
            "repeated_action_count": trailing_run(self.actions),
            "invalid_action_count": self.invalid_action_count,
            "remaining_steps": remaining,
        }

    def history(self) -> dict:
        return {"last_actions": self.actions[-HISTORY:], "last_observations": self.observations[-HISTORY:]}

    def world(self) -> dict:
        targets = {o: loc for o, loc in self.object_at.items()
                   if type_of(o) == self.target_type and o not in self.placed}
        target_location = next(reversed(targets.values()), "") if targets else ""
        return {
            "current_location": self.current_location,
            "inventory": list(self.inventory),
            "object_at": dict(self.object_at),
            "visited": list(self.visited),
            "unvisited": [r for r in self.receptacles if r not in self.visited],
            "target_found": bool(targets) or any(type_of(o) == self.target_type for o in self.inventory),
            "target_location": target_location,
            "placed_count": len(self.placed),
            "placed_items": list(self.placed),
            "placed_locations": sorted(set(self.placed.values())),
            "lamp_location": self.lamp_location,
            "transformed": dict(self.transformed),
        }
