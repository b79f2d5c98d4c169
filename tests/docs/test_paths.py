"""The docs name only files that exist: every `src/...` or `polyvox/...` path in README.md and
docs/architecture.md, and every file or folder docs/architecture.md names in backquotes."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "polyvox"
DOCS = ("README.md", "docs/architecture.md")
# a path starts a word (so /etc/polyvox/... and /opt/polyvox/... are not ours)
SOURCE_PATH = re.compile(r"(?<![\w/.-])((?:src/)?polyvox/[\w./-]*[\w/])")
QUOTED = re.compile(r"`([^`\s]+)`")


def source_paths(text: str) -> list[str]:
    return SOURCE_PATH.findall(text)


def exists(path: str) -> bool:
    path = path.rstrip("/")
    if path.startswith("polyvox/"):
        path = "src/" + path
    return (ROOT / path).exists()


@pytest.mark.parametrize("doc", DOCS)
def test_every_source_path_in_the_docs_exists(doc: str) -> None:
    paths = source_paths((ROOT / doc).read_text(encoding="utf-8"))
    assert paths, f"{doc} names no source path: the pattern is wrong"
    assert [p for p in paths if not exists(p)] == []


def quoted_paths(text: str) -> list[str]:
    """Backquoted names of source files and folders: a `.py` ending, or a path ending in `/`."""
    found = []
    for token in QUOTED.findall(text):
        token = token.rstrip(".,:;")
        if "(" in token or "=" in token or token.startswith(("http", "/", "-", "$")):
            continue
        if re.fullmatch(r"[\w./-]+\.py", token) or re.fullmatch(r"[\w.-]+(/[\w.-]+)*/", token):
            found.append(token)
    return found


def names_something(token: str) -> bool:
    if exists(token) or (ROOT / token).exists() or (PACKAGE / token).exists():
        return True
    # a bare file name ("graphs.py") in a section about one folder: it exists somewhere in the package
    return "/" not in token and any(PACKAGE.rglob(token))


def test_every_file_docs_architecture_names_exists() -> None:
    tokens = quoted_paths((ROOT / "docs/architecture.md").read_text(encoding="utf-8"))
    assert "batching/core.py" in " ".join(tokens) or "core.py" in tokens
    assert [t for t in tokens if not names_something(t)] == []


def test_the_patterns_catch_a_missing_file() -> None:
    assert not exists("src/polyvox/no_such_package/module.py")
    assert not names_something("server/no_such_route.py") and not names_something("no_such_module.py")
    assert source_paths("see src/polyvox/x.py and /etc/polyvox/a.env") == ["src/polyvox/x.py"]
