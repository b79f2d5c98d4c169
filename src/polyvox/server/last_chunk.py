"""`is_last_chunk`: whether an ASGI message is an HTTP response's last, the one that ends its body. What
a client holding its whole answer must find done runs as that message goes out, not after it: the
request counts (`MetricsMiddleware`, `UtteraRequestsMiddleware`), a streamed answer's release and usage
(`SpeechStreamResponse`) and a key's stream lease (`tenancy/streams.py`)."""

from __future__ import annotations

from starlette.types import Message


def is_last_chunk(message: Message) -> bool:
    return message["type"] == "http.response.body" and not message.get("more_body", False)
