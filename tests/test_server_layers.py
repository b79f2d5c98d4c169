"""The server's layers contract (pyproject.toml, checked by `lint-imports` in `make test` and `make lint`)
places every module of `polyvox.server` in exactly one layer: a module added later and left out of it
would escape the contract unseen. Read from the files, not by importing them."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "src" / "polyvox" / "server"
CONTRACT = "The server in layers"


def server_modules() -> set[str]:
    """Every module of polyvox.server below its own __init__ (packages are named by their modules)."""
    found = set()
    for path in SERVER.rglob("*.py"):
        parts = path.relative_to(SERVER).with_suffix("").parts
        if parts[-1] != "__init__":
            found.add(".".join(("polyvox", "server", *parts)))
    return found


def layer_entries() -> list[set[str]]:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["name"].startswith(CONTRACT)]
    return [{name.strip() for name in layer.replace("|", ":").split(":")} for layer in layers]


def test_every_server_module_is_in_exactly_one_layer():
    entries = layer_entries()
    placed: dict[str, list[int]] = {}
    for module in server_modules():
        placed[module] = [
            index
            for index, layer in enumerate(entries)
            if any(module == entry or module.startswith(entry + ".") for entry in layer)
        ]
    assert {m for m, layers in placed.items() if not layers} == set(), "left out of the server's layers"
    assert {m: layers for m, layers in placed.items() if len(layers) > 1} == {}, "in more than one layer"


def test_every_entry_of_the_contract_names_a_module_or_package_that_exists():
    modules = server_modules()
    for layer in layer_entries():
        for entry in layer:
            assert any(m == entry or m.startswith(entry + ".") for m in modules), entry
