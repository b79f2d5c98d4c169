"""`polyvox serve --help` shows its flags in the groups docs/configuration.md shows the settings in, each
flag under its setting's group, and says each default once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

CONFIGURATION = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


@pytest.fixture(scope="module")
def help_text() -> str:
    result = subprocess.run(
        [sys.executable, "-m", "polyvox.cli", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "100"},
        check=True,
    )
    return result.stdout


def documented_groups() -> dict[str, list[str]]:
    """docs/configuration.md's groups: each `### Title` and the flags of its table."""
    groups: dict[str, list[str]] = {}
    table = CONFIGURATION.read_text().split("## Every setting", 1)[1].split("\n## ", 1)[0]
    for section in table.split("\n### ")[1:]:
        title, body = section.split("\n", 1)
        groups[title.strip()] = re.findall(r"^\| `(--[a-z0-9-]+)`", body, flags=re.M)
    return groups


def help_sections(text: str) -> dict[str, str]:
    """The help's sections by title (a line `Title:` at the left edge) and their text."""
    parts = re.split(r"^(\S[^\n]*):\n", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_the_help_groups_the_flags_as_the_documentation_does(help_text: str) -> None:
    groups = documented_groups()
    assert len(groups) >= 10
    sections = help_sections(help_text)
    for title, flags in groups.items():
        assert title in sections, f"no help section {title!r}"
        for flag in flags:
            assert re.search(rf"^  {flag}\b", sections[title], flags=re.M), f"{flag} is not under {title}"


def test_each_default_is_said_once(help_text: str) -> None:
    entries = re.split(r"\n(?=  -)", help_text)
    assert len(entries) > 70
    for entry in entries:
        said = " ".join(entry.split())
        assert said.count("(default") <= 1, said
