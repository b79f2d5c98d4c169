"""ElevenLabs-shaped routes under `/elevenlabs` (a client's base URL is `http://host:8000/elevenlabs`):
text-to-speech over HTTP, with timestamps, and the `stream-input` / `multi-stream-input` sockets, all
spoken through the same `SpeechService`, voices, keys and limits as `/v1/audio/speech` (docs/agents.md)."""
