"""Config files for `hr1 <stage> --config=...`: a path, or a shipped config by name (`demo`,
`demo.py`, `configs/demo.py`), which also works from an installed wheel. Overrides
(`--config.a.b=v`) are checked against the loaded config before absl sees them, so an unknown
key is one line naming the closest valid key (absl/ml_collections would raise a bare
`AttributeError: "'key'"`)."""
from __future__ import annotations

import difflib
import importlib.util
import os
import re
from pathlib import Path

import ml_collections

from hr1_jax.errors import InputError

_PACKAGE_DIR = Path(__file__).resolve().parent
# absl spellings of an override: --config.a.b=v, --config.a.b v, -config.a.b, --noconfig.a.b (bool)
_OVERRIDE = re.compile(r"^--?(?:no)?config\.([^=]+)")
_CONFIG_FLAG = re.compile(r"^--?config(=|$)")


def shipped_configs_dir() -> Path:
    """The repo's configs/ (source checkout, editable install) or its copy hr1_jax/configs (wheel)."""
    installed = _PACKAGE_DIR / "configs"
    return installed if installed.is_dir() else _PACKAGE_DIR.parent / "configs"


def shipped_config_names() -> list[str]:
    return sorted(p.stem for p in shipped_configs_dir().glob("*.py") if not p.name.startswith("_"))


def split_config_flag(argv: list[str]) -> tuple[str | None, list[str]]:
    """(the value of `--config=X` / `--config X` or None, argv without it)."""
    spec, rest, i = None, [], 0
    while i < len(argv):
        match = _CONFIG_FLAG.match(argv[i])
        if not match:
            rest.append(argv[i])
        elif match.group(1) == "=":
            spec = argv[i].split("=", 1)[1]
        elif i + 1 < len(argv):
            spec, i = argv[i + 1], i + 1
        else:
            raise InputError("--config needs a value: a config file or a shipped name "
                             f"({', '.join(shipped_config_names())})")
        i += 1
    return spec, rest


def resolve_config(spec: str) -> tuple[str, str | None]:
    """`FILE[:ARG]`, or a shipped name with optional `:ARG` -> (path, ARG or None)."""
    path, _, arg = spec.partition(":")
    if os.path.isfile(path):
        return path, arg or None
    name = path.removeprefix("configs/").removesuffix(".py")
    shipped = shipped_configs_dir() / f"{name}.py"
    if "/" not in name and shipped.is_file():
        return str(shipped), arg or None
    raise InputError(f"config file not found: {path} (shipped configs: {', '.join(shipped_config_names())})")


def load_config(path: str, arg: str | None = None) -> ml_collections.ConfigDict:
    """`get_config([ARG])` of the file at `path`; a file that fails is an InputError naming it."""
    spec = importlib.util.spec_from_file_location(f"hr1_config_{Path(path).stem}", path)
    if spec is None:
        raise InputError(f"config {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        config = module.get_config(*([arg] if arg else []))
    except Exception as e:  # any error inside the user's config file is reported as that file's
        raise InputError(f"cannot load config {path}: {type(e).__name__}: {e}") from e
    if not isinstance(config, ml_collections.ConfigDict):
        raise InputError(f"config {path}: get_config() returned {type(config).__name__}, not a ConfigDict")
    return config


def config_keys(config: ml_collections.ConfigDict, prefix: str = "") -> list[str]:
    """Every dotted key of `config`, sections and leaves."""
    keys = []
    for name, value in config.items():
        keys.append(prefix + name)
        if isinstance(value, ml_collections.ConfigDict):
            keys += config_keys(value, f"{prefix}{name}.")
    return keys


def check_overrides(config: ml_collections.ConfigDict, argv: list[str]) -> None:
    """Every `--config.KEY` override names a key of `config`; else InputError with the closest."""
    keys = config_keys(config)
    for arg in argv:
        match = _OVERRIDE.match(arg)
        if match and match.group(1) not in keys:
            raise InputError(unknown_key_message(match.group(1), keys))


def unknown_key_message(key: str, keys: list[str]) -> str:
    close = difflib.get_close_matches(key, keys, n=1)
    if not close:  # a short or misplaced key (`lr`, `grpo.num_step`): compare the last parts
        leaves = {}
        for k in keys:
            leaves.setdefault(k.rsplit(".", 1)[-1], []).append(k)
        leaf = difflib.get_close_matches(key.rsplit(".", 1)[-1], list(leaves), n=1)
        close = leaves[leaf[0]][:3] if leaf else []
    hint = f"; did you mean {' or '.join('config.' + k for k in close)}?" if close else ""
    return f"unknown config key config.{key}{hint}"
