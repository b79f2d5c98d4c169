"""The engine factory picks the engine the settings ask for."""

from __future__ import annotations

import sys

import pytest

from polyvox.engines.base import Engine
from polyvox.engines.factory import build_engine
from polyvox.settings import Settings


def test_no_checkpoint_serves_the_embedded_voice() -> None:
    engine = build_engine(Settings())
    assert isinstance(engine, Engine)
    assert engine.info.name == "embedded"
    assert not engine.ready  # built, not started: the app's lifespan starts it


@pytest.mark.parametrize("overrides", [{"random_weights": "tiny"}, {"model": "/no/such/checkpoint"}])
def test_a_checkpoint_or_random_weights_select_voxcpm2(
    overrides: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    class Recorder:
        @classmethod
        def from_settings(cls, settings: Settings) -> str:
            calls.append(settings)
            return "voxcpm2 engine"

    module = type(sys)("polyvox.engines.voxcpm2")
    module.VoxCPM2Engine = Recorder
    monkeypatch.setitem(sys.modules, "polyvox.engines.voxcpm2", module)
    settings = Settings(**overrides)
    assert build_engine(settings) == "voxcpm2 engine"
    assert calls == [settings]
