"""Structured logging shared by every stage.

Every stage emits one JSON line per event through `log_event`, prefixed with `HR1 ` so the lines
can be grepped out of mixed output (`grep '^HR1 ' log | cut -c5- | jq .`).
"""
from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_LOGGER_NAME = "hr1"


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
    payload = {"ts": round(time.time(), 3), "stage": stage, "event": event}
    payload.update({k: _jsonable(v) for k, v in fields.items()})
    return "HR1 " + json.dumps(payload, sort_keys=False)


def log_event(stage: str, event: str, **fields: Any) -> None:
    """Print one structured line (`HR1 {json}`) to stderr: the per-stage log convention."""
    print(format_event(stage, event, **fields), file=sys.stderr, flush=True)
