"""Named API keys' admin API under `/admin/keys` (an admin key only): make one (its secret is in that
answer and nowhere else, ever), list them, revoke one (refused everywhere within a second). An open
server makes no key here: its first key is the operator's (`polyvox keys create`)."""

from __future__ import annotations

from typing import Literal

import anyio
from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from polyvox.server.deps import get_tenancy
from polyvox.server.errors import APIError
from polyvox.server.tenancy.keys import ApiKey, InvalidKeyRequest, KeyLimits, KeyNameTaken, new_key
from polyvox.server.tenancy.service import Tenancy

router = APIRouter(prefix="/admin/keys", tags=["admin"])


class Limits(BaseModel):
    requests_per_minute: int | None = Field(None, ge=1)
    characters_per_minute: int | None = Field(None, ge=1, description="Input characters per minute.")
    max_streams: int | None = Field(None, ge=1, description="Speech requests and WebSocket sessions at once.")


class KeyCreate(BaseModel):
    name: str = Field(description="Labels the key's usage and metrics; unique.")
    scopes: list[Literal["speech", "voices", "admin"]] | None = Field(
        None, description="Default: speech and voices."
    )
    limits: Limits = Field(default_factory=Limits)


class KeyItem(BaseModel):
    id: str
    object: Literal["api_key"] = "api_key"
    name: str
    scopes: list[str]
    limits: Limits
    created_at: int
    last_used_at: int | None = None

    @classmethod
    def of(cls, key: ApiKey) -> KeyItem:
        limits = Limits(
            requests_per_minute=key.limits.requests_per_minute,
            characters_per_minute=key.limits.characters_per_minute,
            max_streams=key.limits.max_streams,
        )
        return cls(
            id=key.id,
            name=key.name,
            scopes=list(key.scopes),
            limits=limits,
            created_at=key.created_at,
            last_used_at=key.last_used_at,
        )


class KeyCreated(KeyItem):
    key: str = Field(description="The secret: shown this once, stored only as its SHA-256.")


class KeyList(BaseModel):
    object: Literal["list"] = "list"
    data: list[KeyItem]


class KeyDeleted(BaseModel):
    id: str
    object: Literal["api_key"] = "api_key"
    deleted: bool = True


@router.post("", status_code=201)
async def create_key(body: KeyCreate, tenancy: Tenancy = Depends(get_tenancy)) -> KeyCreated:
    table = tenancy.keys
    if not table.required:  # an open server: whoever asked first would close it to everyone else
        raise APIError(
            403,
            "this server is open (it requires no API key), so its first key is made by its operator: run "
            "`polyvox keys create NAME --scopes admin` with the server's voices_dir or state_url",
            code="open_server",
        )
    try:
        scopes = tuple(body.scopes) if body.scopes is not None else None
        secret, key = new_key(body.name, scopes, KeyLimits(**body.limits.model_dump()))
        await anyio.to_thread.run_sync(table.store.add, key)
    except InvalidKeyRequest as exc:
        status = 409 if isinstance(exc, KeyNameTaken) else 400
        raise APIError(status, exc.message, param=exc.param, code=exc.code) from exc
    await table.refresh()  # this process knows it before the answer leaves
    return KeyCreated(key=secret, **KeyItem.of(key).model_dump())


@router.get("")
async def list_keys(tenancy: Tenancy = Depends(get_tenancy)) -> KeyList:
    table = tenancy.keys
    keys = await anyio.to_thread.run_sync(table.store.all)
    return KeyList(data=[KeyItem.of(table.with_recent_use(key)) for key in keys])


@router.delete("/{key_id}")
async def revoke_key(key_id: str, tenancy: Tenancy = Depends(get_tenancy)) -> KeyDeleted:
    table = tenancy.keys
    if not await anyio.to_thread.run_sync(table.store.remove, key_id):
        raise APIError(404, f"no key with id {key_id!r}", param="key_id", code="key_not_found")
    await table.refresh()
    return KeyDeleted(id=key_id)
