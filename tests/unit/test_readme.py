"""The README stays the entry point it is meant to be: short, its two commands the ones CI runs, every page it
links to there."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def test_the_readme_is_short_and_says_the_two_commands_ci_runs():
    assert len(README.splitlines()) <= 150
    assert "make demo" in README and "make test" in README
    assert re.search(r"^make test\b", (REPO / ".ci" / "run").read_text(), re.MULTILINE)


def test_every_page_the_readme_links_to_exists():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert links
    missing = [link for link in links if not link.startswith("http") and not (REPO / link).exists()]
    assert missing == []


def test_every_page_in_docs_is_in_the_readmes_table():
    pages = {p.name for p in (REPO / "docs").glob("*.md")}
    listed = set(re.findall(r"\]\(docs/([^)#]+\.md)", README))
    assert pages - listed == set()
