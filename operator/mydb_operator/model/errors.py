"""The error a spec that passed admission but cannot be run raises."""

from __future__ import annotations


class SpecError(ValueError):
    """The spec passed admission but cannot be run; `field` names the culprit."""

    def __init__(self, field_path: str, message: str):
        super().__init__(f"spec.{field_path}: {message}")
        self.field = field_path
