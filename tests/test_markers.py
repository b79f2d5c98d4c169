"""Every test has exactly one kind (`unit`, `server`, `process`, `browser`, `parity`, `cluster`), so that
`make test-fast` (`-m "unit or server"`) runs exactly the tests that start no subprocess and no browser;
tests/helpers/kinds.py finds each test's kind from what its code reaches."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

from helpers.kinds import KINDS, kind_of, reached_kinds
from helpers.serve_process import polyvox_serve
from helpers.server import running_server

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def kinds_of(item: pytest.Item) -> set[str]:
    return {mark.name for mark in item.iter_markers() if mark.name in KINDS}


def test_every_test_collected_in_this_run_has_exactly_one_kind(request: pytest.FixtureRequest) -> None:
    items = request.session.items
    assert request.node in items
    without_one = {item.nodeid: sorted(kinds_of(item)) for item in items if len(kinds_of(item)) != 1}
    assert not without_one


def test_the_kinds_are_the_markers_pyproject_declares_and_unknown_marks_are_refused() -> None:
    options = tomllib.loads(PYPROJECT.read_text())["tool"]["pytest"]["ini_options"]
    assert sorted(line.split(":")[0] for line in options["markers"]) == sorted(KINDS)
    assert "--strict-markers" in options["addopts"].split()


def _with_a_subprocess(tmp_path):
    return subprocess.run(["true"], check=True)


def _served_by_polyvox_serve():
    with polyvox_serve() as (_, url):
        return url


def _around_a_helper():
    return _served_by_polyvox_serve()


class _Cluster:
    def start(self):
        return _around_a_helper()


@pytest.mark.unit  # its own mark wins: it only names the helpers below, it calls none of them
def test_a_kind_is_found_through_the_helpers_and_classes_a_test_calls(request: pytest.FixtureRequest) -> None:
    assert reached_kinds([_with_a_subprocess]) == {"process"}
    assert "process" in reached_kinds([_around_a_helper])  # polyvox_serve starts a subprocess
    assert "process" in reached_kinds([_Cluster])
    assert reached_kinds([running_server]) == {"server"}
    assert reached_kinds([kinds_of]) == set()
    assert "process" in reached_kinds([request.function]) and kind_of(request.node) == "unit"
