"""The emotions a request may ask for (`emotion`), and how each is said to a model that designs voices
from words: a style phrase in VoxCPM2's voice-design description, after the request's `instructions`.

The official VoxCPM2 code puts one "(control)" description before the text, alone (`voxcpm design`)
or beside a reference clip or a transcribed prompt clip (`voxcpm clone --control`): an emotion rides in
that same description, so it restyles designed, builtin, stored and cloned voices alike.
"""

from __future__ import annotations

from typing import Literal, get_args

Emotion = Literal["neutral", "happy", "angry", "sad"]
EMOTIONS: tuple[str, ...] = get_args(Emotion)
# What an engine without voice design speaks: its voices have one delivery, taken as neutral.
NEUTRAL_ONLY: tuple[str, ...] = ("neutral",)

_STYLES: dict[str, str] = {
    "neutral": "neutral, even tone",
    "happy": "happy, cheerful tone",
    "angry": "angry, forceful tone",
    "sad": "sad, sorrowful tone",
}


def style_description(instructions: str | None, emotion: str | None) -> str | None:
    """The voice-design description of a request: its `instructions`, then the emotion's style phrase
    after a comma ("a warm, slow voice, happy, cheerful tone"); either alone; None for neither."""
    described = (instructions or "").strip()
    if emotion is None:
        return described or None
    style = _STYLES[emotion]
    return f"{described.rstrip('.;,')}, {style}" if described else style
