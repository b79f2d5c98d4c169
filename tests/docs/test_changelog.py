"""CHANGELOG.md keeps Keep a Changelog's form and its newest release is the version being built
(pyproject.toml's), which the images' tags and `polyvox --version` carry too."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_newest_release_in_the_changelog_is_this_version():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    text = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[0] == "Unreleased"
    assert headings[1].split()[0] == version, "release the version in pyproject.toml, or bump it"
    sections = set(re.findall(r"^### (.+)$", text, re.M))
    kinds = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security", "Upgrading"}
    assert sections and sections <= kinds, sections - kinds
