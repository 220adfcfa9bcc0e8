"""One flag style for every `hr1` stage: snake_case names (`--row_index`, `--base_url`), as absl
spells them; the kebab spelling (`--base-url`) is accepted and rewritten."""
from __future__ import annotations


def snake_case_flags(argv: list[str]) -> list[str]:
    """`--base-url=x` -> `--base_url=x`; values, positional arguments and anything after `--` are kept."""
    out = []
    for i, arg in enumerate(argv):
        if arg == "--":
            return out + argv[i:]
        if arg.startswith("--") and len(arg) > 2:
            name, eq, value = arg[2:].partition("=")
            arg = "--" + name.replace("-", "_") + eq + value
        out.append(arg)
    return out
