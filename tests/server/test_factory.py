"""The engine factory picks the engine the settings ask for."""

from __future__ import annotations

import sys

import pytest

from polyvox.backends.base import Backend
from polyvox.backends.factory import build_backend
from polyvox.settings import Settings


def test_no_checkpoint_serves_the_embedded_voice() -> None:
    backend = build_backend(Settings())
    assert isinstance(backend, Backend)
    assert backend.info.name == "embedded"
    assert not backend.ready  # built, not started: the app's lifespan starts it


@pytest.mark.parametrize("overrides", [{"random_weights": "tiny"}, {"model": "/no/such/checkpoint"}])
def test_a_checkpoint_or_random_weights_select_voxcpm2(
    overrides: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    class Recorder:
        @classmethod
        def from_settings(cls, settings: Settings, engine_sockets=None, connect=False) -> str:
            calls.append(settings)
            return "voxcpm2 engine"

    module = type(sys)("polyvox.backends.voxcpm")
    module.VoxCPMBackend = Recorder
    monkeypatch.setitem(sys.modules, "polyvox.backends.voxcpm", module)
    settings = Settings(**overrides)
    assert build_backend(settings) == "voxcpm2 engine"
    assert calls == [settings]
