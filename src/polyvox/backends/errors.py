"""Exceptions back ends raise; the server translates each into one HTTP error, once."""

from __future__ import annotations


class BackendError(Exception):
    """Something went wrong inside a back end (a 5xx for the affected request only)."""


class BackendOverloaded(BackendError):
    """The back end cannot take more work now (429)."""


class PieceLost(BackendError):
    """The back end lost a request before any of its audio had come back (the engine process holding it
    died, or was down as it was sent): it may be sent again as it is (`rerun.sent`)."""


class AudioLost(BackendError):
    """The back end lost a request after some of its audio had come back (the engine process serving it
    died). A caller that has passed none of that audio on may run the request again from its start,
    with its seed (`rerun.opened`); otherwise a 500, as any BackendError."""


class BackendInputError(ValueError):
    """The request is well-formed but this back end cannot serve it (422); `param` names the field."""

    def __init__(self, message: str, param: str | None = None, code: str = "unsupported_input"):
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code


class EmptyInput(BackendInputError):
    """The input has nothing to speak once the text front end has prepared it (no piece with a letter or
    a digit): "", blanks and punctuation alike, on every back end. The server answers 400 `empty_input`,
    as OpenAI answers an empty `input`."""

    def __init__(self) -> None:
        super().__init__("The input has no words or numbers to speak.", param="input", code="empty_input")
