"""Many teams on one server: named API keys with scopes and limits, per-key rate limits, usage."""
