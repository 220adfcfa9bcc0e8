"""JSON that can always be stored.

Strings from hooks and endpoints may hold lone surrogates (a JSON "\\ud800" escape decodes to one)
that UTF-8 cannot encode, and results may hold objects JSON cannot represent or nest deeper than
the encoder recurses. `json_safe` maps any value to plain JSON data whose strings all encode;
the writers here sanitise only when the plain dump fails (valid data is written unchanged) and
replace files atomically, so a bad row never truncates a file or loses the rows beside it.
"""
from __future__ import annotations

import contextlib
import json
import os
import threading
from typing import Any, Iterable

MAX_DEPTH = 64
TOO_DEEP = "<nested too deep>"
_JSON_KEY_TYPES = (str, int, float, bool, type(None))


def safe_str(text: str) -> str:
    """`text`, with every code point UTF-8 cannot encode (lone surrogates) replaced by '?'."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def _safe_key(key: Any) -> Any:
    if isinstance(key, str):
        return safe_str(key)
    return key if isinstance(key, _JSON_KEY_TYPES) else safe_str(str(key))


def json_safe(value: Any, depth: int = MAX_DEPTH) -> Any:
    """Plain JSON data (dict/list/str/number/bool/None) that json.dumps and UTF-8 always accept;
    identity on data that already is. Containers deeper than `depth` become TOO_DEEP."""
    if isinstance(value, str):
        return safe_str(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return json_safe(value.item(), depth)  # numpy / jax scalars
    if depth <= 0:
        return TOO_DEEP
    if isinstance(value, dict):
        return {_safe_key(k): json_safe(v, depth - 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, depth - 1) for v in value]
    return safe_str(str(value))


def dumps(value: Any, **kwargs) -> str:
    """json.dumps(value, ensure_ascii=False, **kwargs) that never fails: the sanitised form is
    dumped only when the plain one cannot be (unencodable text, foreign objects, deep nesting)."""
    try:
        text = json.dumps(value, ensure_ascii=False, **kwargs)
        text.encode("utf-8")
        return text
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return json.dumps(json_safe(value), ensure_ascii=False, **kwargs)


def dumps_line(value: Any) -> str:
    """One JSONL line (with its newline) of `value`."""
    return dumps(value) + "\n"


def _write_atomic(path: str, chunks: Iterable[str]) -> None:
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"  # unique per writer, same filesystem
    try:
        f = open(tmp, "w", encoding="utf-8")
    except FileNotFoundError:  # the folder is made only when missing: most writes go to one that exists
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        f = open(tmp, "w", encoding="utf-8")
    try:
        with f:
            for chunk in chunks:
                f.write(chunk)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: str, value: Any, indent: int | None = 1, **kwargs) -> None:
    """`value` as UTF-8 JSON at `path`, replaced atomically (old file or new, never a partial one)."""
    _write_atomic(path, [dumps(value, indent=indent, **kwargs)])


def write_jsonl(path: str, rows: Iterable[Any]) -> None:
    """One UTF-8 JSON line per row at `path`, replaced atomically; each row sanitised on its own."""
    _write_atomic(path, (dumps_line(row) for row in rows))
