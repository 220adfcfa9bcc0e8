"""Bad input a user can fix (a missing or broken file, an unknown config key): `hr1` prints the
message as one line and exits 2, with no traceback unless `--debug` or HR1_DEBUG=1."""
from __future__ import annotations


class InputError(ValueError):
    """A file or value given on the command line (or named by the config) is unusable."""


def read_input_text(path: str, what: str) -> str:
    """The text of a user-named file; a missing or unreadable one is an InputError naming `what`."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise InputError(f"{what} not found: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read {what} {path}: {e}") from None
