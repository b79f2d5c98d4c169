"""`GET /v1/usage?start=&end=`: usage rows per key, per model, per day; a key sees its own, an admin
key every key's. `start` and `end` are dates (YYYY-MM-DD, UTC) or Unix times, both included; unset,
today. While the store cannot be read (Redis unreachable) it answers 503 `usage_unavailable` saying
why; what this process could not write meanwhile is kept and written when it returns (`usage_writer`)."""

from __future__ import annotations

import datetime as dt
from typing import Literal

import anyio
from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel

from polyvox.server.deps import get_tenancy
from polyvox.server.errors import APIError
from polyvox.server.tenancy.caller import caller_of
from polyvox.server.tenancy.service import Tenancy
from polyvox.server.tenancy.usage import UsageUnavailable

router = APIRouter(tags=["usage"])
MAX_DAYS = 366


class UsageItem(BaseModel):
    object: Literal["usage.day"] = "usage.day"
    key_name: str
    model: str
    date: str
    requests: int
    input_characters: int
    audio_seconds: float
    cache_hits: int


class UsageList(BaseModel):
    object: Literal["list"] = "list"
    data: list[UsageItem]


def _day(value: str | None, param: str) -> dt.date:
    if value is None:
        return dt.datetime.now(dt.UTC).date()
    try:
        if value.isdigit():
            return dt.datetime.fromtimestamp(int(value), dt.UTC).date()
        return dt.date.fromisoformat(value)
    except (ValueError, OverflowError, OSError) as exc:
        raise APIError(
            400, f"{param}: a date (YYYY-MM-DD) or a Unix time", param=param, code="invalid_value"
        ) from exc


@router.get("/v1/usage")
async def usage(
    request: Request,
    start: str | None = None,
    end: str | None = None,
    tenancy: Tenancy = Depends(get_tenancy),
) -> UsageList:
    first, last = _day(start, "start"), _day(end, "end")
    if last < first or (last - first).days >= MAX_DAYS:
        raise APIError(400, f"end: from start, at most {MAX_DAYS} days", param="end", code="invalid_value")
    caller = caller_of(request)
    store = tenancy.usage
    try:
        rows = await anyio.to_thread.run_sync(store.rows, first, last, None if caller.admin else caller.name)
    except UsageUnavailable as exc:
        raise APIError(
            503, f"usage cannot be read now: {exc}", code="usage_unavailable", headers={"Retry-After": "5"}
        ) from exc
    return UsageList(data=[UsageItem(**vars(row)) for row in rows])
