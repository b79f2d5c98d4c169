"""`describe` → `info`: one TTS program, polyvox, whose voices are the voices the Wyoming caller may
speak (builtin, registered, stored, the back end's LoRA adapters), each in the back end's languages."""

from __future__ import annotations

from wyoming.info import Attribution, Info, TtsProgram, TtsVoice

from polyvox import __version__
from polyvox.backends.base import Backend
from polyvox.server.tenancy.caller import Caller
from polyvox.server.tenancy.ownership import may_use
from polyvox.voices.registry import VoiceRegistry

PROGRAM = "polyvox"
ATTRIBUTION = Attribution(name="polyvox", url="https://github.com/polyvox/polyvox")


def describe(backend: Backend, registry: VoiceRegistry, caller: Caller) -> Info:
    languages = list(backend.info.languages)
    voices = [
        TtsVoice(
            name=detail.id,
            attribution=ATTRIBUTION,
            installed=True,
            description=detail.description or detail.name,
            version=None,
            languages=languages,
        )
        for detail in registry.infos(backend)
        if may_use(caller, *registry.access_of(detail.id))
    ]
    program = TtsProgram(
        name=PROGRAM,
        attribution=ATTRIBUTION,
        installed=True,
        description=f"polyvox {backend.info.name} ({backend.info.model_id})",
        version=__version__,
        voices=voices,
        supports_synthesize_streaming=True,
    )
    return Info(tts=[program])
