"""No two modules of models/ import each other, directly or through others, even from inside a function:
a family's folder imports the shared parts and `family.py`; the registry (`architectures.py`) and what
looks families up (`model_source.py`, `random_checkpoint.py`) import the families, never the reverse."""

from __future__ import annotations

import grimp


def test_no_module_of_models_imports_one_that_imports_it_back():
    graph = grimp.build_graph("polyvox")
    modules = sorted(m for m in graph.modules if m.startswith("polyvox.models."))
    loops = [
        (a, b)
        for i, a in enumerate(modules)
        for b in modules[i + 1 :]
        if graph.chain_exists(a, b) and graph.chain_exists(b, a)
    ]
    assert loops == []
