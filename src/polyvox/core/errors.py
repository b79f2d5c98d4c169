"""What the engine (engine/ and core/) raises for one request. The back end that drives it
translates each into the API side's error (backends/errors.py) at its edge, so nothing here knows how
an error reaches a client."""

from __future__ import annotations


class EngineError(RuntimeError):
    """The engine could not finish the request (its step failed, the engine or its rank is down)."""


class EngineOverloaded(EngineError):
    """The engine cannot take the request now (e.g. running requests pin every LoRA adapter slot)."""


class EngineInputError(ValueError):
    """The engine cannot serve this request as it is (its prompt leaves no room to speak, no such
    adapter). `param` names the request's field at fault; `code` says why, in a word."""

    def __init__(self, message: str, param: str | None = None, code: str = "unsupported_input"):
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
