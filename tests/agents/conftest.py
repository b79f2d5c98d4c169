"""A polyvox server with the embedded (piper) voice behind the text front end, on loopback: real speech,
with the exact word times piper's phoneme lengths give, for the agent clients' tests."""

from __future__ import annotations

import pytest

from helpers.server import running_server
from polyvox.backends.factory import build_text_pipeline
from polyvox.server.app import create_app
from polyvox.settings import Settings

VOICE = "onyx"  # piper's calm style: the one heard most reliably


@pytest.fixture(scope="package")
def embedded_url():
    embedded = pytest.importorskip("polyvox.backends.embedded")
    settings = Settings()
    backend = embedded.EmbeddedBackend()
    app = create_app(settings, backend, build_text_pipeline(settings, backend))
    with running_server(app) as url:
        yield url
