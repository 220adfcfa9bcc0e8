"""Errors of the patch protocol: one base class with a short machine-readable code."""
from __future__ import annotations


class PatchError(ValueError):
    """A response or patch is unusable. `code` is a short stable tag (e.g. `no_json`,
    `too_many_actions`, `forbidden_syntax`) for counting; `message` is for humans."""

    def __init__(self, code: str, message: str):
        self.code = code
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class HookCompileError(PatchError):
    """Hook source failed the static sandbox checks (reference spec §3.1)."""
