"""YAML documents as the tests read rendered charts: with libyaml's parser when PyYAML was built with it.

A rendered database chart is about 90 KB: PyYAML's pure-Python parser takes 44 ms of CPU for it, libyaml
3 ms, and the quick tier parses some 400 renders beside the serial e2e pass on 2 cores."""

from __future__ import annotations

from typing import Any

import yaml

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def documents(text: str) -> list[Any]:
    """The documents of TEXT, empty ones left out."""
    return [document for document in yaml.load_all(text, Loader=LOADER) if document]
