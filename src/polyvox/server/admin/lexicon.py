"""The pronunciation lexicon's admin API under `/admin/lexicon`: list, add or replace, delete (by the
term in the path, or in a JSON body `{"term": ...}`, which takes any term a URL could not), reload.

Edits take effect on the next request and are saved to `settings.lexicon_path` (atomically) when one
is set; without it they last until the server stops (behind `api_server_count` the launcher names one
in its working directory, so every API process has them). Without `state_url`, servers sharing the
file edit it in turn under its lock, each starting from what it holds, so none drops another's edit.
`/admin/*` needs an admin key when admin keys are configured (see `server.auth`). A malformed entry or
file answers 400.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Literal, TypeVar

import anyio
from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from polyvox.server.deps import get_lexicon, get_settings
from polyvox.server.errors import APIError
from polyvox.settings import Settings
from polyvox.text.lexicon import Lexicon, LexiconEntry, LexiconError, shown_term

router = APIRouter(prefix="/admin/lexicon", tags=["admin"])
T = TypeVar("T")


class LexiconItem(BaseModel):
    term: str = Field(min_length=1, description="Word or phrase to replace, matched as a whole word.")
    say: str = Field(min_length=1, description="What to say instead.")
    case_sensitive: bool = False


class LexiconList(BaseModel):
    object: Literal["list"] = "list"
    data: list[LexiconItem]
    path: str | None = Field(None, description="The file edits are saved to; null: kept in memory only.")


class LexiconTerm(BaseModel):
    term: str = Field(description="The term whose entry to delete.")


class LexiconDeleted(BaseModel):
    term: str
    deleted: bool = True


def _served(lexicon: Lexicon | None) -> Lexicon:
    if lexicon is None:
        raise APIError(404, "this server's engine has no text front end, so no lexicon", code="not_found")
    return lexicon


def _listing(lexicon: Lexicon) -> LexiconList:
    items = [_item(entry) for entry in lexicon.entries()]
    return LexiconList(data=items, path=str(lexicon.path) if lexicon.path is not None else None)


def _item(entry: LexiconEntry) -> LexiconItem:
    return LexiconItem(term=entry.term, say=entry.say, case_sensitive=entry.case_sensitive)


async def _edit(lexicon: Lexicon | None, settings: Settings, change: Callable[[Lexicon], T]) -> T:
    """`change` applied and saved. With `state_url`, state/lexicon_sync merges the servers' edits;
    without it, other servers may share the file: edit it under its lock (`Lexicon.editing`)."""
    served = _served(lexicon)
    sharing_file = not settings.state_url

    def edit() -> T:
        with served.editing() if sharing_file else contextlib.nullcontext():
            result = change(served)
            if served.path is not None:
                served.save()
        return result

    try:
        return await anyio.to_thread.run_sync(edit)
    except LexiconError as exc:  # the file's lock stayed held
        raise APIError(503, str(exc), code="lexicon_unavailable", headers={"Retry-After": "5"}) from exc


@router.get("", response_model=LexiconList)
async def list_entries(lexicon: Lexicon | None = Depends(get_lexicon)) -> LexiconList:
    """Every entry, sorted by term."""
    return _listing(_served(lexicon))


@router.post("", response_model=LexiconItem, status_code=201)
async def add_entry(
    item: LexiconItem,
    lexicon: Lexicon | None = Depends(get_lexicon),
    settings: Settings = Depends(get_settings),
) -> LexiconItem:
    """Add an entry, replacing any entry for the same term."""

    def add(lexicon: Lexicon) -> LexiconEntry:
        try:
            return lexicon.add(item.term, item.say, item.case_sensitive)
        except LexiconError as exc:
            raise APIError(400, str(exc), param=exc.param or "term", code="invalid_lexicon_entry") from exc

    return _item(await _edit(lexicon, settings, add))


@router.delete("", response_model=LexiconDeleted)
async def delete_entry_by_body(
    body: LexiconTerm,
    lexicon: Lexicon | None = Depends(get_lexicon),
    settings: Settings = Depends(get_settings),
) -> LexiconDeleted:
    """Remove the entry for the body's `term` (404 when there is none): any term, whatever a URL holds."""
    return await _delete(lexicon, settings, body.term)


@router.delete("/{term:path}", response_model=LexiconDeleted)
async def delete_entry(
    term: str, lexicon: Lexicon | None = Depends(get_lexicon), settings: Settings = Depends(get_settings)
) -> LexiconDeleted:
    """Remove the entry for `term` (404 when there is none)."""
    return await _delete(lexicon, settings, term)


async def _delete(lexicon: Lexicon | None, settings: Settings, term: str) -> LexiconDeleted:
    def remove(lexicon: Lexicon) -> None:
        if not lexicon.remove(term):
            raise APIError(
                404, f"the lexicon has no entry {shown_term(term)}", param="term", code="not_found"
            )

    await _edit(lexicon, settings, remove)
    return LexiconDeleted(term=term)


@router.post("/reload", response_model=LexiconList)
async def reload_entries(lexicon: Lexicon | None = Depends(get_lexicon)) -> LexiconList:
    """Re-read the lexicon file (after editing it by hand); a malformed file keeps the current entries."""
    served = _served(lexicon)
    try:
        await anyio.to_thread.run_sync(served.reload)
    except LexiconError as exc:
        raise APIError(400, str(exc), code="invalid_lexicon") from exc
    return _listing(served)
