"""Every link and path in the docs leads somewhere: a relative link in README.md or docs/*.md reaches a
file of the repository (and its `#fragment` a heading of that page), and every repository path written
in backquotes (`deploy/nginx/polyvox.conf`, `bench/soak.py`) exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
QUOTED = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def prose(text: str) -> str:
    """The page without its fenced code blocks (a `#` there is a comment, a `[x](y)` code)."""
    return FENCE.sub("", text)


def anchors(text: str) -> set[str]:
    """The fragments GitHub gives a page's headings: lower case, punctuation dropped, spaces as dashes,
    a repeated heading numbered from -1."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} (.+?)\s*$", prose(text), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(prose(text)):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file.read_text(encoding="utf-8")):
            broken.append(f"{target}: no heading #{fragment} in {file.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_reaches_a_file_and_heading(page: Path) -> None:
    assert broken_links(page) == []


def repo_paths(text: str) -> list[str]:
    """Backquoted paths that start at a folder of the repository's top level (`deploy/...`,
    `tests/deploy`, `src/polyvox/...`): a path from the root, so it must exist. Paths inside a
    server's data directories or URLs (`voices_dir/builtin/`, `/ui/assets/`) start elsewhere."""
    tops = {p.name for p in ROOT.iterdir() if p.is_dir() and p.name not in (".git", ".venv")}
    found = []
    for token in QUOTED.findall(text):
        token = token.strip()
        if " " in token or "*" in token or "/" not in token:
            continue
        if token.split("/", 1)[0] in tops:
            found.append(token)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_backquoted_repository_path_exists(page: Path) -> None:
    paths = repo_paths(page.read_text(encoding="utf-8"))
    assert [p for p in paths if not (ROOT / p.rstrip("/")).exists()] == []


def test_the_checks_catch_a_broken_link_a_missing_heading_and_a_missing_path(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## Deploying with `state_url`\n", encoding="utf-8")
    page.write_text(
        "# Page\n\n[a](other.md#deploying-with-state_url) [b](#page) [c](missing.md) [d](other.md#gone)\n"
        "```sh\n[not a link](nowhere.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page) == ["missing.md: no such file", "other.md#gone: no heading #gone in other.md"]
    assert repo_paths("`deploy/no-such.conf` and `voices_dir/builtin/` and `/ui/assets/`") == [
        "deploy/no-such.conf"
    ]
