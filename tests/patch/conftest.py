"""Shared fixtures of the patch tests."""
import json

import pytest

from tests.patch.refdata import REF


@pytest.fixture(scope="session")
def replay_states() -> dict:
    return json.loads((REF / "demo" / "artifacts" / "replay_states.json").read_text(encoding="utf-8"))
