"""Event logging shared by every stage: `log_event(stage, event, **fields)`, one line per event on stderr.

Two formats, chosen by `HR1_LOG_FORMAT`:
- human (the default): ISO time, stage, event and the few numbers that matter, e.g.
  `2026-01-05T10:11:12 grpo step 3/48 reward=+0.123 valid=0.75 loss=0.0001 lr=1.0e-04 s=1.2`;
- `json`: every field, machine-readable, prefixed with `HR1 ` so the lines can be grepped out of
  mixed output (`HR1_LOG_FORMAT=json hr1 ... 2>log; grep '^HR1 ' log | cut -c5- | jq .`).
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any

_LOGGER_NAME = "hr1"
FORMAT_ENV = "HR1_LOG_FORMAT"

# (stage, event) -> the fields a person reads first: (field, label, format). Other fields are only
# in the JSON form (and TensorBoard).
KEY_FIELDS: dict[tuple[str, str], tuple[tuple[str, str, str], ...]] = {
    ("grpo", "step"): (("reward/mean", "reward", "{:+.3f}"), ("reward/valid_patch_rate", "valid", "{:.2f}"),
                       ("train/loss", "loss", "{:.4g}"), ("train/lr", "lr", "{:.1e}"), ("perf/step_s", "s", "{:.1f}")),
}
_MAX_VALUE_CHARS = 300   # long values (reasons, paths) stay readable; the JSON form keeps them whole
_MAX_NESTED_CHARS = 80


def get_logger(name: str | None = None) -> logging.Logger:
    """A child of the `hr1` logger, configured once to print to stderr."""
    root = logging.getLogger(_LOGGER_NAME)
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        root.propagate = False
    return root.getChild(name) if name else root


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()  # numpy / jax scalars
    return str(value)


def format_event(stage: str, event: str, **fields: Any) -> str:
    """The machine form: `HR1 {"ts": epoch seconds, "stage": ..., "event": ..., fields...}`."""
    payload = {"ts": round(time.time(), 3), "stage": stage, "event": event}
    payload.update({k: _jsonable(v) for k, v in fields.items()})
    return "HR1 " + json.dumps(payload, sort_keys=False)


def iso_now() -> str:
    """Local time, ISO 8601 to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        text = json.dumps(value, separators=(",", ":"))
        return text if len(text) <= _MAX_NESTED_CHARS else text[:_MAX_NESTED_CHARS - 1] + "…"
    text = str(value)
    if any(c in text for c in "\n\r\t"):
        text = json.dumps(text)   # one event, one line
    return text if len(text) <= _MAX_VALUE_CHARS else text[:_MAX_VALUE_CHARS - 1] + "…"


def format_human(stage: str, event: str, **fields: Any) -> str:
    """The person form: ISO time, stage, event, the event's `name` (or step/steps), key=value pairs."""
    fields = {k: _jsonable(v) for k, v in fields.items()}
    parts = [iso_now(), stage, event]
    if "name" in fields:
        parts.append(_short(fields.pop("name")))
    if event == "step" and "step" in fields:
        step, total = fields.pop("step"), fields.pop("num_steps", None)
        parts.append(f"{step}/{total}" if total is not None else str(step))
    chosen = KEY_FIELDS.get((stage, event))
    if chosen is None:
        parts += [f"{k}={_short(v)}" for k, v in fields.items()]
    else:
        parts += [f"{label}={fmt.format(fields[key] + 0.0)}" for key, label, fmt in chosen   # + 0.0: no "-0"
                  if isinstance(fields.get(key), (int, float))]
    return " ".join(parts)


def json_format() -> bool:
    """True when `HR1_LOG_FORMAT=json` asks for the machine form."""
    return os.environ.get(FORMAT_ENV, "").strip().lower() == "json"


def _write(line: str) -> None:
    if "tqdm" in sys.modules:   # a live progress bar: print above it instead of through it
        sys.modules["tqdm"].tqdm.write(line, file=sys.stderr)
        sys.stderr.flush()
    else:
        print(line, file=sys.stderr, flush=True)


def log_event(stage: str, event: str, **fields: Any) -> None:
    """Print one event line to stderr: human by default, `HR1 {json}` with `HR1_LOG_FORMAT=json`."""
    _write((format_event if json_format() else format_human)(stage, event, **fields))
