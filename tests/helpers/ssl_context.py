"""One SSL context for every httpx client the tests make, and every httpx2 client (the official OpenAI
client's HTTP library, a fork of httpx with the same constructor).

httpx builds a new context for each client made with the default `verify=True`, parsing certifi's CA
bundle again (about 25 ms of CPU), and `httpx.get`/`httpx.post` make a client per call: the suite's
thousands of requests and `/ready` polls paid that each time (462 clients, 24.5 s of CPU in four test
files). Clients made without a `verify` of their own share one context, httpx's default; the servers
the tests talk to are plain HTTP on loopback, and a test that needs its own trust (nginx's TLS) passes it.
"""

from __future__ import annotations

import functools
import importlib.util
import ssl

import certifi
import httpx

SHARED = ssl.create_default_context(cafile=certifi.where())  # what httpx builds for verify=True


def share_one_ssl_context() -> None:
    """Make httpx's and httpx2's `Client` and `AsyncClient` use `SHARED` where they would build their own."""
    classes = [httpx.Client, httpx.AsyncClient]
    if importlib.util.find_spec("httpx2") is not None:
        import httpx2

        classes += [httpx2.Client, httpx2.AsyncClient]
    for client_class in classes:
        if getattr(client_class.__init__, "shares_ssl_context", False):
            continue
        client_class.__init__ = _sharing(client_class.__init__)  # type: ignore[method-assign]


def _sharing(init):
    @functools.wraps(init)
    def __init__(self, *args, verify=True, **kwargs) -> None:
        init(self, *args, verify=SHARED if verify is True else verify, **kwargs)

    __init__.shares_ssl_context = True  # type: ignore[attr-defined]
    return __init__
