"""VoxCPM 1.x is built of the shared parts (`models/layers/`) by holding them, never by subclassing
VoxCPM2's classes: no class of `models/voxcpm1/` has a class of `models/voxcpm2/` among its ancestors
(both families' LMs and configs share `models/speech_lm.py` and `models/speech_config.py` instead), so a
change to a VoxCPM2 class cannot reach VoxCPM 1.x unnoticed through inheritance."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import polyvox.models.voxcpm1 as voxcpm1


def _classes_of(package) -> list[type]:
    classes = []
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        module = importlib.import_module(info.name)
        classes += [
            c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__
        ]
    return classes


def test_no_voxcpm1_class_inherits_from_voxcpm2():
    classes = _classes_of(voxcpm1)
    assert {"VoxCPM1LM", "VoxCPM1Config", "VoxCPM1"} <= {c.__name__ for c in classes}
    inherited = {
        cls.__qualname__: [
            base.__qualname__ for base in cls.__mro__ if base.__module__.startswith("polyvox.models.voxcpm2")
        ]
        for cls in classes
    }
    assert {name: bases for name, bases in inherited.items() if bases} == {}
