"""`hr1 patch check FILE... [--benchmark B] [--json]`: validate patch files or raw engineer responses.

A file may hold a patch JSON object, a wrapper object with the patch (or the response text)
under a key such as "patch" or "response", or a raw engineer response (any non-JSON text).
Each file is parsed, normalised and sandbox-compiled exactly as on the reward path. Prints
`valid` or the reason per file; exit status 0 only if every file is valid.
"""
from __future__ import annotations

import argparse
import json
import sys

from envs.registry import names as benchmark_names
from hr1_jax.patch.compiled import compile_patch
from hr1_jax.patch.errors import PatchError
from hr1_jax.patch.parse import ASSISTANT_TAG, PROTOCOLS, extract_response_json
from hr1_jax.utils.argv import snake_case_flags

PATCH_KEYS = ("patch", "normalized_patch", "raw_patch", "parsed_patch")
TEXT_KEYS = ("response", "completion", "text", "output", "content")


def _guess_protocol(text: str) -> str:
    tail = text.rsplit(ASSISTANT_TAG, 1)[-1].lstrip()
    return "full_think_patch" if tail[:6].lower() == "<think" else "prefill_think_patch"


def _from_text(text: str, protocol: str) -> dict:
    return extract_response_json(text, _guess_protocol(text) if protocol == "auto" else protocol)


def load_raw_patch(path: str, protocol: str = "auto") -> dict:
    """The raw (un-normalised) patch dict held by `path`; raises PatchError."""
    try:
        with open(path, encoding="utf-8") as f:
            content = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise PatchError("unreadable", f"cannot read file: {e}") from None
    try:
        data = json.loads(content)
    except json.JSONDecodeError as e:
        if content.lstrip().startswith("{"):  # meant as patch JSON: say so rather than parse it as a response
            raise PatchError("bad_json", f"file opens a JSON object but is not valid JSON: {e}") from None
        return _from_text(content, protocol)  # a raw engineer response
    if isinstance(data, str):
        return _from_text(data, protocol)
    if not isinstance(data, dict):
        raise PatchError("not_object", f"file holds a JSON {type(data).__name__}, not a patch")
    if "actions" in data:
        return data
    for key in PATCH_KEYS:
        value = data.get(key)
        if isinstance(value, dict):
            return value
        if isinstance(value, str):
            try:
                inner = json.loads(value)
            except json.JSONDecodeError:
                return _from_text(value, protocol)
            if isinstance(inner, dict):
                return inner
    for key in TEXT_KEYS:
        if isinstance(data.get(key), str):
            return _from_text(data[key], protocol)
    raise PatchError("no_patch", f"no patch found in JSON object (keys: {', '.join(sorted(data)[:12])})")


def check_file(path: str, benchmark: str | None, protocol: str, normalize_kwargs: dict) -> dict:
    report = {"file": path, "valid": False, "benchmark": None, "hooks": [], "error_code": "", "error": ""}
    try:
        raw = load_raw_patch(path, protocol)
        own = str(raw.get("benchmark") or "").lower()
        if benchmark and own and own != benchmark:
            raise PatchError("benchmark_mismatch", f"patch is for {own!r}, expected {benchmark!r}")
        compiled = compile_patch(raw, benchmark or own, **normalize_kwargs)
    except PatchError as e:
        report.update(error_code=e.code, error=e.message)
        return report
    report.update(valid=True, benchmark=compiled.benchmark, hooks=compiled.hook_names)
    return report


EPILOG = """reads no config file. Flags are snake_case (kebab spellings such as --hook-once also work).

example:
  hr1 patch check response.txt --benchmark=NAME
  hr1 patch check runs/eval/responses/*/*.txt --json"""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hr1 patch", description="Harness-R1 patch tools.", epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="validate patch files or raw engineer responses", description=__doc__,
                           epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("files", nargs="+", metavar="FILE")
    check.add_argument("--benchmark", choices=benchmark_names(), help="expected benchmark (default: the patch's own)")
    check.add_argument("--protocol", choices=("auto",) + PROTOCOLS, default="auto",
                       help="response protocol for raw responses (auto: full-think if it opens with <think>)")
    check.add_argument("--json", action="store_true", help="print one JSON report list")
    check.add_argument("--allow_legacy", action="store_true", help="accept legacy DSL actions (not code-hook-only)")
    check.add_argument("--hook_once", action="store_true", help="reject patches that use a hook name twice")
    check.add_argument("--max_total_code_chars", type=int, default=0, help="total code budget (0 = none)")
    try:
        args = parser.parse_args(snake_case_flags(argv))
    except SystemExit as e:
        return int(e.code or 0)
    kwargs = {"require_code_hook_only": not args.allow_legacy, "enforce_hook_once": args.hook_once,
              "max_total_code_chars": max(0, args.max_total_code_chars)}
    reports = [check_file(f, args.benchmark, args.protocol, kwargs) for f in args.files]
    if args.json:
        print(json.dumps(reports, indent=2))
    else:
        for r in reports:
            if r["valid"]:
                print(f"{r['file']}: valid ({r['benchmark']}; hooks: {', '.join(r['hooks'])})")
            else:
                print(f"{r['file']}: invalid: {r['error_code']}: {r['error']}")
    sys.stdout.flush()
    return 0 if all(r["valid"] for r in reports) else 1
