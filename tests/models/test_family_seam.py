"""The engine names no model family, not even at import time: importing every module of `core/` and
`engine/` loads no `models/voxcpm*` module (the registry imports a family on first use), and each family
the registry names declares the names it is registered under."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from polyvox.models.architectures import FAMILIES, load_family

IMPORT_THE_ENGINE = """
import importlib, json, pkgutil, sys
import polyvox.core, polyvox.engine
for package in (polyvox.core, polyvox.engine):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(info.name)
print(json.dumps(sorted(m for m in sys.modules if m.startswith("polyvox.models.voxcpm"))))
"""


def test_importing_the_engine_loads_no_model_family():
    # a fresh interpreter: in this one, other tests' imports would hide what the engine pulls in
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_THE_ENGINE], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout.splitlines()[-1]) == []


@pytest.mark.parametrize("registered", FAMILIES, ids=lambda registered: registered.config_architecture)
def test_each_registered_family_declares_the_names_it_is_registered_under(registered):
    family = load_family(registered)
    assert (family.config_architecture, family.archs) == (registered.config_architecture, registered.archs)
