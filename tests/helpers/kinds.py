"""The kind of each test (`unit`, `server`, `process`, `browser`, `parity`, `cluster`; declared in
pyproject.toml), found from what the test's code reaches: its function, the fixtures it uses and the
functions and classes of tests/ they call, followed by name. A test's own kind mark wins.

- `cluster`: reaches tests/deploy/cluster.py (replicas, redis-server and nginx together);
- `browser`: uses tests/web's `browser` or `page` fixture (headless Chromium);
- `parity`: reaches tests/helpers/official*.py (the official `voxcpm` package);
- `process`: reaches `subprocess`, `multiprocessing` or asyncio's subprocesses (polyvox serve, the CLI,
  redis-server, nginx: tests/helpers/serve_process.py, redis_server.py, nginx.py all go through them);
- `server`: reaches uvicorn (tests/helpers/server.py's `running_server`, the `serve` fixture);
- `unit`: none of these.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Iterable
from pathlib import Path

import pytest

KINDS = ("unit", "server", "process", "browser", "parity", "cluster")
# The first kind found in this order is the test's.
PRECEDENCE = ("cluster", "browser", "parity", "process", "server")
TESTS = Path(__file__).resolve().parent.parent
PROCESS_MODULES = ("subprocess", "multiprocessing", "asyncio.subprocess", "concurrent.futures.process")
PROCESS_ATTRIBUTES = {"create_subprocess_exec", "create_subprocess_shell", "ProcessPoolExecutor"}


def _module_kind(name: str) -> str | None:
    if name == "deploy.cluster":
        return "cluster"
    if name.startswith("helpers.official"):
        return "parity"
    if any(name == module or name.startswith(module + ".") for module in PROCESS_MODULES):
        return "process"
    if name == "uvicorn" or name.startswith("uvicorn."):
        return "server"
    return None


def _in(obj: object, folder: Path) -> bool:
    obj = inspect.unwrap(obj) if callable(obj) else obj
    try:
        file = inspect.getfile(obj)  # type: ignore[arg-type]
    except (TypeError, OSError):
        return False
    return _file_in(file, folder)


@functools.cache  # resolving a path reads every folder on the way: once per file, not once per look
def _file_in(file: str, folder: Path) -> bool:
    return Path(file).resolve().is_relative_to(folder)


def _is_tests_module(value: object) -> bool:
    return isinstance(value, types.ModuleType) and _in(value, TESTS)


def _codes(code: types.CodeType) -> Iterable[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _functions(obj: object) -> Iterable[types.FunctionType]:
    """The functions of tests/ that `obj` stands for: itself, or a class's methods."""
    obj = inspect.unwrap(obj) if callable(obj) else obj
    if isinstance(obj, types.FunctionType):
        yield obj
    elif isinstance(obj, type):
        for value in vars(obj).values():
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            elif isinstance(value, property):
                value = value.fget
            if isinstance(value, types.FunctionType):
                yield value


def reached_kinds(roots: Iterable[object]) -> set[str]:
    """The kinds reached from `roots` (functions or classes), following names into tests/ only."""
    return {kind for root in roots for function in _functions(root) for kind in _reached_from(function)}


@functools.cache  # a helper or fixture is reached from many tests: followed once
def _reached_from(root: types.FunctionType) -> frozenset[str]:
    found: set[str] = set()
    seen: set[int] = set()
    pending = [root]
    while pending:
        function = pending.pop()
        if id(function) in seen:
            continue
        seen.add(id(function))
        for code in _codes(function.__code__):
            if PROCESS_ATTRIBUTES & set(code.co_names):
                found.add("process")
            names = set(code.co_names)
            values = [function.__globals__.get(name) for name in names]
            # `module.name` for a module of tests/ (`from helpers import nginx`, then `nginx.check()`)
            values += [getattr(v, name, None) for v in values if _is_tests_module(v) for name in names]
            for value in values:
                if value is None:
                    continue
                if isinstance(value, types.ModuleType):
                    kind = _module_kind(value.__name__)
                else:
                    kind = _module_kind(getattr(value, "__module__", None) or "")
                if kind:
                    found.add(kind)
                if (callable(value) or isinstance(value, type)) and _in(value, TESTS):
                    pending.extend(_functions(value))
    return frozenset(found)


def _fixtures_of(item: pytest.Item, under: Path = TESTS) -> dict[str, object]:
    """The functions of the fixtures `item` uses (directly or not) that are defined under `under`."""
    info = getattr(item, "_fixtureinfo", None)
    found: dict[str, object] = {}
    for name in getattr(item, "fixturenames", ()):
        definitions = info.name2fixturedefs.get(name) if info else None
        if definitions and _in(definitions[-1].func, under):
            found[name] = definitions[-1].func
    return found


def kind_of(item: pytest.Item) -> str:
    """`item`'s kind: its own kind mark, else the first kind its code reaches, else `unit`."""
    own = [mark.name for mark in item.iter_markers() if mark.name in KINDS]
    if own:
        return own[0]
    if "browser" in _fixtures_of(item, under=TESTS / "web"):
        return "browser"
    roots = [getattr(item, "function", None), *_fixtures_of(item).values()]
    found = reached_kinds(root for root in roots if root is not None)
    return next((kind for kind in PRECEDENCE if kind in found), "unit")


def mark_kinds(items: Iterable[pytest.Item]) -> None:
    """Give every test that has no kind mark of its own the kind its code reaches."""
    for item in items:
        if not any(mark.name in KINDS for mark in item.iter_markers()):
            item.add_marker(kind_of(item))


def heaviest_files_first(items: list[pytest.Item]) -> None:
    """Order the files by their heaviest kind (`PRECEDENCE`: clusters, browsers, then processes...,
    unit tests last), keeping each file's tests and files of one kind in their order. `make test` hands
    whole files to its workers in this order, so the small unit files fill the end of the run instead of
    one worker finishing a long browser or cluster file while the other waits."""
    rank = {kind: len(PRECEDENCE) - index for index, kind in enumerate(PRECEDENCE)}
    heaviest: dict[Path, int] = {}
    for item in items:
        kinds = [mark.name for mark in item.iter_markers() if mark.name in rank]
        weight = max((rank[kind] for kind in kinds), default=0)
        heaviest[item.path] = max(heaviest.get(item.path, 0), weight)
    items.sort(key=lambda item: -heaviest[item.path])
