"""Per-key limits: requests and input characters per minute (one window per calendar minute, checked
and counted together, atomically), and speech streams at once. `Limiter` keeps the counts in Redis
when `state_url` is set (one Lua script per check: every API process and replica shares them), and
in this process otherwise or while Redis is unreachable. A refusal is `RateLimited` (a 429 with
`Retry-After` and OpenAI's `x-ratelimit-*` headers; characters are its "tokens").

Not the `limits` package, which would change what a caller sees: (1) its limiters count one limit
per `hit()`, and `FixedWindowRateLimiter.hit` increments before it compares, so a refused request
would still be counted, and a request refused for its characters would still use up a request (here
both counts move only when both fit, in one Lua script); (2) its fixed window starts at a key's first
hit (the counter's EXPIRE), not at the calendar minute every replica agrees on, so `Retry-After` and
`x-ratelimit-reset-*` would change; (3) its Redis storage opens its own client, outside the replica's
`StateConnection` (its timeouts, failing at once while Redis is unreachable, then counting here);
(4) it has no limit on things open at once, which the stream leases are."""

from __future__ import annotations

import contextlib
import math
import secrets
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from polyvox.server.tenancy.keys import KeyLimits

if TYPE_CHECKING:
    from collections.abc import Callable

    from polyvox.state.connection import StateConnection

WINDOW_S = 60
# A stream's lease in Redis lasts STREAM_LEASE_S and is renewed every STREAM_RENEW_S while it lives,
# so a stream whose process died stops counting within STREAM_LEASE_S.
STREAM_LEASE_S = 15.0
STREAM_RENEW_S = 5.0
_PREFIX = "polyvox:limits:"

# KEYS: the window's request and character counters. ARGV: requests per minute, characters per minute
# (-1: none), this request's characters, the counters' lifetime. Counts only when both fit.
_CHARGE = """
local r = tonumber(redis.call('GET', KEYS[1]) or '0')
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
local rpm, cpm, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if (rpm >= 0 and r + 1 > rpm) or (cpm >= 0 and c + n > cpm) then return {0, r, c} end
r = redis.call('INCR', KEYS[1]); redis.call('EXPIRE', KEYS[1], ARGV[4])
c = redis.call('INCRBY', KEYS[2], n); redis.call('EXPIRE', KEYS[2], ARGV[4])
return {1, r, c}
"""
# KEYS: the key's open streams (a sorted set of leases by expiry). ARGV: now, the limit, the lease's
# expiry, its id. Answers 1 when opened, else -(the earliest lease's expiry) as a string.
_OPEN_STREAM = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return tostring(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2])
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3]) - tonumber(ARGV[1])))
return 1
"""
# KEYS: the key's open streams. ARGV: the lease's new expiry, its id. Only a lease still there.
_RENEW_STREAM = """
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
"""


@dataclass(frozen=True)
class Window:
    """What a key used of the current minute, and when it ends."""

    requests: int
    characters: int
    reset_s: float


class RateLimited(Exception):
    """A key over one of its limits (`which`: requests, characters or streams)."""

    def __init__(self, which: str, limits: KeyLimits, window: Window | None, retry_after_s: int):
        what = {
            "requests": f"{limits.requests_per_minute} requests per minute",
            "characters": f"{limits.characters_per_minute} input characters per minute",
            "streams": f"{limits.max_streams} speech streams at once (a place frees as a stream ends; "
            f"one whose server died stops counting within {STREAM_LEASE_S:.0f} s)",
        }[which]
        super().__init__(f"rate limit reached for this key: {what}; try again in {retry_after_s} s")
        self.which = which
        self.limits = limits
        self.window = window
        self.retry_after_s = retry_after_s

    def headers(self) -> dict[str, str]:
        headers = {"Retry-After": str(self.retry_after_s)}
        if self.window is not None:
            headers |= window_headers(self.limits, self.window)
        return headers


def window_headers(limits: KeyLimits, window: Window) -> dict[str, str]:
    """OpenAI's `x-ratelimit-*` headers for the limits a key has (characters as `-tokens`)."""
    headers: dict[str, str] = {}
    reset = f"{math.ceil(window.reset_s)}s"
    for suffix, limit, used in (
        ("requests", limits.requests_per_minute, window.requests),
        ("tokens", limits.characters_per_minute, window.characters),
    ):
        if limit is not None:
            headers[f"x-ratelimit-limit-{suffix}"] = str(limit)
            headers[f"x-ratelimit-remaining-{suffix}"] = str(max(0, limit - used))
            headers[f"x-ratelimit-reset-{suffix}"] = reset
    return headers


def stream_retry_after(earliest_expiry: float, now: float) -> int:
    """Retry-After for a key at its `max_streams` in Redis: 1 s while every lease is being renewed (a
    stream may end at any moment); when the earliest one missed its renewals (its process died), the
    seconds until it lapses."""
    left = earliest_expiry - now
    return max(1, math.ceil(left)) if left < STREAM_LEASE_S - 2 * STREAM_RENEW_S else 1


class LocalCounts:
    """This process's counts: each key's current window and open streams."""

    def __init__(self) -> None:
        self._windows: dict[str, tuple[int, int, int]] = {}  # key → (window, requests, characters)
        self._streams: defaultdict[str, int] = defaultdict(int)

    def charge(self, key: str, limits: KeyLimits, characters: int, now: float) -> tuple[bool, Window]:
        window = int(now // WINDOW_S)
        started, requests, chars = self._windows.get(key, (window, 0, 0))
        if started != window:
            requests = chars = 0
        fits = _fits(limits, requests, chars, characters)
        if fits:
            requests, chars = requests + 1, chars + characters
            self._windows[key] = (window, requests, chars)
        return fits, Window(requests, chars, (window + 1) * WINDOW_S - now)

    def open_stream(self, key: str, limit: int) -> bool:
        if self._streams[key] >= limit:
            return False
        self._streams[key] += 1
        return True

    def close_stream(self, key: str) -> None:
        self._streams[key] -= 1
        if self._streams[key] <= 0:
            del self._streams[key]


def _fits(limits: KeyLimits, requests: int, chars: int, characters: int) -> bool:
    rpm, cpm = limits.requests_per_minute, limits.characters_per_minute
    return (rpm is None or requests + 1 <= rpm) and (cpm is None or chars + characters <= cpm)


@dataclass
class StreamLease:
    key: str
    lease: str | None  # its member in Redis' set; None: counted in this process


class Limiter:
    def __init__(self, connection: StateConnection | None = None, clock: Callable[[], float] = time.time):
        """`clock`: the wall clock the per-minute windows are read on (tests stand it still, so what they
        count falls in one minute however loaded the machine); stream leases keep the real one."""
        self.connection = connection
        self.local = LocalCounts()
        self.clock = clock

    def _shared(self) -> StateConnection | None:
        connection = self.connection
        return connection if connection is not None and connection.available else None

    async def charge(self, key: str, limits: KeyLimits, characters: int) -> Window | None:
        """Count one request of `characters` against `key`'s minute; RateLimited when it does not fit
        (and then nothing is counted). None when the key has no per-minute limit."""
        if limits.requests_per_minute is None and limits.characters_per_minute is None:
            return None
        now = self.clock()
        fits, window = await self._charge(key, limits, characters, now)
        if fits:
            return window
        over_requests = (
            limits.requests_per_minute is not None and window.requests + 1 > limits.requests_per_minute
        )
        which = "requests" if over_requests else "characters"
        raise RateLimited(which, limits, window, max(1, math.ceil(window.reset_s)))

    async def _charge(self, key: str, limits: KeyLimits, characters: int, now: float) -> tuple[bool, Window]:
        shared = self._shared()
        if shared is None:
            return self.local.charge(key, limits, characters, now)
        from polyvox.state.connection import StateUnavailable

        window = int(now // WINDOW_S)
        keys = [f"{_PREFIX}{key}:{window}:requests", f"{_PREFIX}{key}:{window}:characters"]
        args = [
            -1 if limits.requests_per_minute is None else limits.requests_per_minute,
            -1 if limits.characters_per_minute is None else limits.characters_per_minute,
            characters,
            WINDOW_S * 2,
        ]
        try:
            fits, requests, chars = await shared.acall(
                "rate_limit", lambda client: client.eval(_CHARGE, len(keys), *keys, *args)
            )
        except StateUnavailable:  # counted here until Redis returns
            return self.local.charge(key, limits, characters, now)
        return bool(fits), Window(int(requests), int(chars), (window + 1) * WINDOW_S - now)

    async def open_stream(self, key: str, limits: KeyLimits) -> StreamLease | None:
        """Count a stream open for `key`; RateLimited past `max_streams`. None: no stream limit."""
        limit = limits.max_streams
        if limit is None:
            return None
        shared = self._shared()
        if shared is not None:
            from polyvox.state.connection import StateUnavailable

            lease = secrets.token_hex(8)
            now = time.time()
            args: list[float | str] = [now, limit, now + STREAM_LEASE_S, lease]
            streams = f"{_PREFIX}{key}:streams"
            try:
                opened = await shared.acall(
                    "stream_limit", lambda client: client.eval(_OPEN_STREAM, 1, streams, *args)
                )
            except StateUnavailable:
                pass
            else:
                if opened != 1:
                    raise RateLimited("streams", limits, None, stream_retry_after(float(opened), now))
                return StreamLease(key, lease)
        if not self.local.open_stream(key, limit):
            raise RateLimited("streams", limits, None, 1)
        return StreamLease(key, None)

    async def renew_stream(self, lease: StreamLease) -> None:
        """Push a live stream's lease in Redis STREAM_LEASE_S ahead (nothing for one counted here)."""
        shared = self.connection
        if lease.lease is None or shared is None:
            return
        from polyvox.state.connection import StateUnavailable

        streams, member = f"{_PREFIX}{lease.key}:streams", lease.lease
        expiry = time.time() + STREAM_LEASE_S
        with contextlib.suppress(StateUnavailable):  # if Redis is away, the next renewal tries again
            await shared.acall(
                "stream_limit",
                lambda client: client.eval(
                    _RENEW_STREAM, 1, streams, expiry, member, math.ceil(STREAM_LEASE_S)
                ),
            )

    async def close_stream(self, lease: StreamLease) -> None:
        if lease.lease is None:
            self.local.close_stream(lease.key)
            return
        shared = self.connection
        if shared is None:
            return
        from polyvox.state.connection import StateUnavailable

        streams, member = f"{_PREFIX}{lease.key}:streams", lease.lease
        with contextlib.suppress(StateUnavailable):  # if Redis is away, the lease expires on its own
            await shared.acall("stream_limit", lambda client: client.zrem(streams, member))
