"""The pronunciation lexicon mirrored through Redis: a hash `entries` (term -> entry) and a `version`
counter, merged term by term as the voices indexes are (see `keyed`), so an edit on one replica
reaches every replica (and its `lexicon_path` file, where one is set)."""

from __future__ import annotations

import json

from polyvox.state.connection import StateConnection
from polyvox.state.keyed import local_changes
from polyvox.text.lexicon import Lexicon, LexiconEntry

PREFIX = "polyvox:lexicon:"


class LexiconMirror:
    def __init__(self, lexicon: Lexicon, connection: StateConnection, prefix: str = PREFIX):
        self.lexicon = lexicon
        self.connection = connection
        self.prefix = prefix
        self.base: dict[str, str] | None = None  # the entries last agreed with Redis; None: never
        self.version: int | None = None

    def forget_base(self) -> None:
        self.base = {}

    @property
    def version_key(self) -> str:
        """The counter in Redis that every change to the lexicon there bumps."""
        return self._key("version")

    def sync(self) -> bool:
        """Push this replica's edits, take Redis' entries; True when the lexicon here changed."""
        digest = self.lexicon.digest
        local = {entry.term: _encode(entry) for entry in self.lexicon.entries()}
        version = self.connection.call("lexicon_version", lambda r: int(r.get(self._key("version")) or 0))
        if self.base is not None and local == self.base and version == self.version:
            return False
        if self.base is not None:
            changes = local_changes(local, self.base)
            if changes:

                def push(client) -> None:
                    pipe = client.pipeline(transaction=True)
                    if changes.set:
                        pipe.hset(self._key("entries"), mapping=changes.set)
                    if changes.deleted:
                        pipe.hdel(self._key("entries"), *changes.deleted)
                    pipe.incr(self._key("version"))
                    pipe.execute()

                self.connection.call("lexicon_push", push)
        remote, version = self.connection.call("lexicon_pull", self._pull)
        changed = remote != local
        if changed:
            entries = [_decode(term, value) for term, value in remote.items()]
            if not self.lexicon.replace_if_unchanged(entries, digest):
                return False  # edited here meanwhile: the next sync pushes that edit first
            if self.lexicon.path is not None:
                self.lexicon.save()
        self.base, self.version = remote, version
        return changed

    def _pull(self, client) -> tuple[dict[str, str], int]:
        pipe = client.pipeline(transaction=True)
        pipe.get(self._key("version"))
        pipe.hgetall(self._key("entries"))
        version, entries = pipe.execute()
        return {k.decode(): v.decode() for k, v in entries.items()}, int(version or 0)

    def _key(self, name: str) -> str:
        return f"{self.prefix}{name}"


def _encode(entry: LexiconEntry) -> str:
    return json.dumps({"say": entry.say, "case_sensitive": entry.case_sensitive}, sort_keys=True)


def _decode(term: str, value: str) -> LexiconEntry:
    item = json.loads(value)
    return LexiconEntry(term, item["say"], bool(item.get("case_sensitive", False)))
