"""Voices directories and lexicons mirrored through a real redis-server: what one replica changes
reaches the others, changes to different voices made at once on different replicas all survive,
and a Redis that lost its data is refilled from the replicas' copies."""

from __future__ import annotations

from pathlib import Path

from polyvox.state.connection import StateConnection
from polyvox.state.lexicon_sync import LexiconMirror
from polyvox.state.mirror import DirectoryMirror
from polyvox.state.replica_sync import ReplicaSync
from polyvox.text.lexicon import Lexicon
from polyvox.voices.store import VoiceEntry, VoiceStore


def connected(url: str) -> StateConnection:
    connection = StateConnection(url)
    assert connection.check()
    return connection


def replica(root: Path, url: str) -> tuple[VoiceStore, DirectoryMirror]:
    store = VoiceStore(root)
    return store, DirectoryMirror(store, connected(url))


def names(store: VoiceStore) -> set[str]:
    entries, problems = store.read()
    assert problems == []
    return set(entries)


def upload(store: VoiceStore, name: str, data: bytes) -> None:
    store.put(
        name,
        data,
        ".wav",
        VoiceEntry(audio="", transcript=f"{name} speaking", consent=True, source="uploaded"),
    )


def clip(store: VoiceStore, name: str) -> bytes:
    entries, _ = store.read()
    return store.clip_path(entries[name]).read_bytes()


def test_a_voice_stored_on_one_replica_reaches_another(redis_server, tmp_path):
    (a, mirror_a), (b, mirror_b) = (
        replica(tmp_path / "a", redis_server.url),
        replica(tmp_path / "b", redis_server.url),
    )
    mirror_a.sync(), mirror_b.sync()
    upload(a, "amy", b"RIFF-amy-clip")
    mirror_a.sync()
    assert mirror_b.sync() is True
    assert names(b) == {"amy"} and clip(b, "amy") == b"RIFF-amy-clip"
    assert mirror_b.sync() is False  # nothing new


def test_changes_made_at_once_on_two_replicas_all_survive(redis_server, tmp_path):
    (a, mirror_a), (b, mirror_b) = (
        replica(tmp_path / "a", redis_server.url),
        replica(tmp_path / "b", redis_server.url),
    )
    mirror_a.sync(), mirror_b.sync()
    upload(a, "bob", b"bob-clip")
    upload(b, "cat", b"cat-clip")
    mirror_a.sync(), mirror_b.sync(), mirror_a.sync()
    assert names(a) == names(b) == {"bob", "cat"}
    assert clip(a, "cat") == b"cat-clip" and clip(b, "bob") == b"bob-clip"


def test_a_deletion_reaches_the_other_replica_with_its_clip(redis_server, tmp_path):
    (a, mirror_a), (b, mirror_b) = (
        replica(tmp_path / "a", redis_server.url),
        replica(tmp_path / "b", redis_server.url),
    )
    mirror_a.sync(), mirror_b.sync()
    upload(a, "dan", b"dan-clip")
    mirror_a.sync(), mirror_b.sync()
    b.remove("dan")
    mirror_b.sync(), mirror_a.sync()
    assert names(a) == set()
    assert list((tmp_path / "a" / "uploads").iterdir()) == []


def test_an_emptied_redis_is_refilled_from_the_replicas(redis_server, tmp_path):
    one = ReplicaSync(connected(redis_server.url), interval_s=60)
    store = VoiceStore(tmp_path / "a")
    one.start(store, lambda changed: None, None)
    upload(store, "eve", b"eve-clip")
    one.sync_once()
    redis_server.stop()
    redis_server.start()  # no persistence: Redis comes back empty, with a new epoch
    one.sync_once()
    newcomer, mirror_n = replica(tmp_path / "n", redis_server.url)
    mirror_n.sync()
    assert names(newcomer) == {"eve"} and clip(newcomer, "eve") == b"eve-clip"
    one.stop()


def test_a_lexicon_edit_reaches_every_replica_and_edits_merge(redis_server):
    a, b = Lexicon(), Lexicon()
    mirror_a, mirror_b = (
        LexiconMirror(a, connected(redis_server.url)),
        LexiconMirror(b, connected(redis_server.url)),
    )
    mirror_a.sync(), mirror_b.sync()
    a.add("SQL", "sequel")
    b.add("nginx", "engine x")
    mirror_a.sync(), mirror_b.sync(), mirror_a.sync()
    assert (
        {e.term: e.say for e in a.entries()}
        == {e.term: e.say for e in b.entries()}
        == {
            "SQL": "sequel",
            "nginx": "engine x",
        }
    )
    assert a.digest == b.digest  # the same audio cache keys on every replica
    b.remove("SQL")
    mirror_b.sync(), mirror_a.sync()
    assert a.apply("SQL on nginx") == "SQL on engine x"


def test_a_returning_replica_does_not_bring_back_a_voice_deleted_while_it_was_away(redis_server, tmp_path):
    store_a, store_b = VoiceStore(tmp_path / "a"), VoiceStore(tmp_path / "b")
    a = ReplicaSync(connected(redis_server.url), interval_s=60)
    a.start(store_a, lambda changed: None, None)
    upload(store_a, "fay", b"fay-clip")
    a.sync_once()
    b = ReplicaSync(connected(redis_server.url), interval_s=60)
    b.start(store_b, lambda changed: None, None)
    assert names(store_b) == {"fay"}
    b.stop()  # replica b goes away, keeping its directory
    store_a.remove("fay")
    a.sync_once()
    back = ReplicaSync(connected(redis_server.url), interval_s=60)
    back.start(VoiceStore(tmp_path / "b"), lambda changed: None, None)
    assert names(store_b) == set()
    a.stop(), back.stop()
