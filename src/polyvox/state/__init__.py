"""State shared by replicas through Redis (`state_url`): the audio cache, and the voices directory
and lexicon mirrored between every replica's own copy and Redis.

Without `state_url` nothing here runs and each replica keeps today's local directories. With it, the
audio cache lives in Redis (`audio_cache`); each replica keeps serving voices and the lexicon from its
own copy, which `sync` keeps in step with Redis (`mirror`, `lexicon_sync`). Redis unreachable:
synthesis goes on from those copies without the cache, changes to voices and the lexicon are refused
with a 503 that says why, `polyvox_state_errors_total` counts what failed, and on Redis' return the
copies resynchronise (into an emptied Redis too: the replicas publish what they hold).
"""
