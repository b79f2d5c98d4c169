"""What a 405's `Allow` header says: every method a route of the app serves on the request's path.
Starlette's own names only the first route whose path matched (`OPTIONS /admin/lexicon/reload` was
told `DELETE`, the pattern `/admin/lexicon/{term}` being first; `/health` only `HEAD`)."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi.routing import iter_route_contexts
from starlette.routing import BaseRoute, compile_path


def allowed_methods(routes: Sequence[BaseRoute], path: str) -> list[str]:
    """The methods of every route (included routers' too) whose path pattern matches `path`, sorted."""
    methods: set[str] = set()
    for route in iter_route_contexts(routes):
        if route.methods and route.path and compile_path(route.path)[0].match(path):
            methods |= route.methods
    return sorted(methods)
