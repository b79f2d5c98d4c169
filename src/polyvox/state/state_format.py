"""The format version of what replicas share in Redis (`state_url`), as `format.json` is a directory's
(`polyvox.files.dir_format`): the key `polyvox:format` says which layout the keys follow, so that a newer
polyvox migrates the state an older one wrote and an older polyvox refuses state a newer one wrote,
instead of misreading it. Redis without the key holds format 0, from before the key existed (the same
layout as format 1: only the key is written)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from polyvox import __version__

if TYPE_CHECKING:
    import redis

FORMAT_KEY = "polyvox:format"
CURRENT_FORMAT = 1


class StateFormatError(Exception):
    """State in Redis this polyvox cannot use as it stands; `str()` is one line that says what to do."""


def ensure_format(client: redis.Redis, where: str) -> int:
    """Check the format of the state at `where` (`client`'s Redis), writing the current one where there
    is none yet; the format found. StateFormatError for a newer or unreadable one; redis.RedisError as
    any call."""
    found, writer = read_format(client, where)
    if found > CURRENT_FORMAT:
        raise StateFormatError(
            f"state_url {where} holds shared state in format {found} (written by {writer}), but polyvox "
            f"{__version__} reads format {CURRENT_FORMAT} at most: upgrade polyvox, or point state_url at "
            "another Redis database"
        )
    if found < CURRENT_FORMAT:  # format 0 has format 1's layout: nothing moves
        payload = {"format": CURRENT_FORMAT, "written_by": f"polyvox {__version__}"}
        client.set(FORMAT_KEY, json.dumps(payload))
    return found


def read_format(client: redis.Redis, where: str) -> tuple[int, str]:
    """The format of the state at `where` and the polyvox that wrote it ((0, "an earlier polyvox")
    without the key)."""
    raw = client.get(FORMAT_KEY)
    if raw is None:
        return 0, "an earlier polyvox"
    try:
        data = json.loads(raw)
        version = data["format"]
    except (UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        raise StateFormatError(
            f"state_url {where}: the key {FORMAT_KEY} cannot be read ({exc}); restore it, or delete it to "
            f"have polyvox {__version__} treat the state as from before format versions"
        ) from exc
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise StateFormatError(f"state_url {where}: the key {FORMAT_KEY} names format {version!r}")
    return version, str(data.get("written_by", "another polyvox"))
