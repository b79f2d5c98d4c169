"""The docs name only files that exist: every `src/...` or `polyvox/...` path in README.md and
docs/*.md, and every file or folder docs/architecture.md names in backquotes. And the map
at the top of docs/architecture.md names every source file, each under its folder, and only files
that exist."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "polyvox"
DOCS = ("README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")))
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
    assert [p for p in paths if not exists(p)] == []


def test_the_docs_name_source_paths() -> None:
    found = [source_paths((ROOT / doc).read_text(encoding="utf-8")) for doc in DOCS]
    assert found[DOCS.index("docs/architecture.md")], (
        "docs/architecture.md names no source path: the pattern is wrong"
    )


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
    assert "core/core.py" in " ".join(tokens) or "core.py" in tokens
    assert [t for t in tokens if not names_something(t)] == []


def test_the_patterns_catch_a_missing_file() -> None:
    assert not exists("src/polyvox/no_such_package/module.py")
    assert not names_something("server/no_such_route.py") and not names_something("no_such_module.py")
    assert source_paths("see src/polyvox/x.py and /etc/polyvox/a.env") == ["src/polyvox/x.py"]


# --- the map: every source file, named under its folder --------------------------------------------

ARCHITECTURE = ROOT / "docs/architecture.md"
MAP_HEADING = "## The map"
ENTRY_WIDTH = 24  # the map's first column: a folder (`server/`, `  speech/` under it) or root files
PY_FILE = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.py)\b")


def the_map(text: str) -> str:
    """The fenced block under the map's heading."""
    after = text.split(MAP_HEADING, 1)[1]
    return after.split("```", 2)[1]


def map_paths(block: str) -> tuple[set[str], set[str]]:
    """The files and the folders under src/polyvox/ that the map names. An entry starts where the first
    column holds a name: a folder (indented two spaces: a folder inside the last unindented one) or root
    files. A bare `name.py` in an entry is a file of the entry's folder; one with a slash is a path from
    src/polyvox/. A folder's entry stands for its `__init__.py`, if it has one."""
    files: set[str] = set()
    folders: set[str] = set()
    top = folder = ""
    for line in block.splitlines():
        entry = line[:ENTRY_WIDTH].strip()
        if entry:
            indented = line.startswith("  ")
            if entry.endswith("/"):
                folder = (top if indented else "") + entry
                top = top if indented else entry
                folders.add(folder)
            else:
                folder = top if indented else ""
                top = top if indented else ""
        for name in PY_FILE.findall(line):
            files.add(name if "/" in name else folder + name)
    return files, folders


def source_files() -> set[str]:
    """Every .py file under src/polyvox/ in the working tree, tracked or not."""
    files = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    return files - {"__init__.py"}  # the package itself is what the map is of


def test_the_map_names_every_source_file() -> None:
    files, folders = map_paths(the_map(ARCHITECTURE.read_text(encoding="utf-8")))
    missing = sorted(source_files() - files - {folder + "__init__.py" for folder in folders})
    assert missing == [], (
        "docs/architecture.md's map does not name these files (add each as `name.py` in its folder's "
        "entry, with what it holds):\n  " + "\n  ".join(missing)
    )


def test_every_file_the_map_names_exists() -> None:
    files, folders = map_paths(the_map(ARCHITECTURE.read_text(encoding="utf-8")))
    assert len(files) > 100 and len(folders) > 10, "the map names too few files: the parser is wrong"
    gone = sorted(name for name in files if not (PACKAGE / name).is_file())
    gone += sorted(name for name in folders if not (PACKAGE / name).is_dir())
    assert gone == [], "docs/architecture.md's map names files that do not exist:\n  " + "\n  ".join(gone)


def test_the_map_reader_resolves_each_name_in_its_folder() -> None:
    block = (
        "cli.py                  the command; flags.py is beside it\n"
        "server/                 app.py, the\n"
        "                        errors.py (see voices/store.py)\n"
        "  speech/               route.py\n"
        "text/                   split.py\n"
    )
    files, folders = map_paths(block)
    assert files == {
        "cli.py", "flags.py", "server/app.py", "server/errors.py", "voices/store.py",
        "server/speech/route.py", "text/split.py",
    }  # fmt: skip
    assert folders == {"server/", "server/speech/", "text/"}
