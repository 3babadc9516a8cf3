"""What a rule test file gave of a mapping, as the keywords of the ledger method it changes."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def given(model: BaseModel, *but: str) -> dict[str, Any]:
    """The keys of ``model`` the file gave (``null`` included), but those named, with their
    values: the keywords of a ledger method whose defaults keep what is left out."""
    return {key: getattr(model, key) for key in model.model_fields_set - set(but)}
