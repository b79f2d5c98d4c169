"""Instant cloning on `POST /v1/audio/speech` through the batching engine: multipart uploads (every
field alias) and JSON `ref_audio` (base64 or a data URL), streamed and not, all inside one batch with
other requests; a clip is encoded once, and with a fixed seed the same clip gives the same audio."""

from __future__ import annotations

import asyncio
import base64
import json

import httpx
import numpy as np

from helpers.audio import decode, pcm_samples
from helpers.metrics import scrape, value
from voices.clips import data_url, flac_clip, wav_clip

SPEECH = "/v1/audio/speech"
SECONDS = 0.48  # three 160 ms patches


def sse_pcm(body: str) -> np.ndarray:
    events = [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]
    assert events[-1]["type"] == "speech.audio.done"
    return pcm_samples(b"".join(base64.b64decode(e["audio"]) for e in events[:-1]))


def test_clones_by_multipart_and_json_streamed_and_not_share_batches_with_other_requests(voxcpm_server):
    clip = wav_clip(1.5, pitch=140.0)
    other = flac_clip(2.0, pitch=220.0)
    with voxcpm_server() as url:

        async def main() -> list[tuple[str, httpx.Response]]:
            async with httpx.AsyncClient(base_url=url, timeout=300) as client:

                def plain(i: int):
                    return client.post(
                        SPEECH, json={"input": f"Plain request {i}.", "response_format": "wav"}
                    )

                def multipart(field: str, data: bytes, **form):
                    fields = {"input": "Cloned by upload.", "response_format": "wav", **form}
                    return client.post(SPEECH, data=fields, files={field: ("clip.bin", data)})

                requests = {
                    "plain0": plain(0),
                    "plain1": plain(1),
                    "custom_voice_file": multipart("custom_voice_file", clip),
                    "speaker_wav_streamed": multipart("speaker_wav", other, stream_format="audio"),
                    "voice_file_with_text": multipart("voice_file", clip, ref_text="A test clip."),
                    "json_base64": client.post(
                        SPEECH,
                        json={
                            "input": "Cloned from JSON.",
                            "response_format": "wav",
                            "ref_audio": base64.b64encode(other).decode(),
                        },
                    ),
                    "json_data_url_sse": client.post(
                        SPEECH,
                        json={
                            "input": "Cloned and streamed as events.",
                            "response_format": "pcm",
                            "stream_format": "sse",
                            "ref_audio": data_url(clip),
                            "ref_text": "A test clip.",
                        },
                    ),
                    "plain2_streamed": client.post(
                        SPEECH,
                        json={"input": "Plain streamed.", "response_format": "wav", "stream_format": "audio"},
                    ),
                }
                responses = await asyncio.gather(*requests.values())
                return list(zip(requests, responses, strict=True))

        results = asyncio.run(main())
        stats = voxcpm_server.backend.stats()
        assert stats.mean_batch_size > 1 and stats.kv_blocks_used == 0

    for name, response in results:
        assert response.status_code == 200, (name, response.text)
        if name == "json_data_url_sse":
            samples, rate = sse_pcm(response.text), 24000
        else:
            samples, rate = decode(response.content)
        assert abs(samples.size / rate - SECONDS) < 0.05, name
        assert np.isfinite(samples).all() and np.abs(samples).max() > 0, name
        expected_cache = "DISABLED" if name.startswith("plain") else "ADHOC"
        assert response.headers["x-cache"] == expected_cache, name


def test_concurrent_clones_of_different_clips_each_encode_their_clip_once(voxcpm_server):
    with voxcpm_server() as url:

        async def main() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=url, timeout=300) as client:
                clips = [wav_clip(1.2, pitch=100.0 + 30 * i) for i in range(6)]
                return await asyncio.gather(
                    *(
                        client.post(
                            SPEECH,
                            json={"input": f"Clone {i}.", "response_format": "wav", "ref_audio": data_url(c)},
                        )
                        for i, c in enumerate(clips)
                    )
                )

        responses = asyncio.run(main())
        assert all(r.status_code == 200 for r in responses)
        samples = scrape(url)
        assert value(samples, "polyvox_voice_prompt_encodes_total") == 6


def test_the_same_clip_twice_is_encoded_once_and_gives_the_same_audio_with_a_fixed_seed(voxcpm_server):
    clip = flac_clip(1.5, pitch=170.0)
    with voxcpm_server() as url:
        before = scrape(url)
        upload = httpx.post(
            f"{url}{SPEECH}",
            data={"input": "Same clip.", "response_format": "wav", "seed": "11"},
            files={"custom_voice_file": ("clip.flac", clip)},
            timeout=120,
        )
        assert upload.status_code == 200, upload.text
        middle = scrape(url)
        as_json = httpx.post(
            f"{url}{SPEECH}",
            json={"input": "Same clip.", "response_format": "wav", "seed": 11, "ref_audio": data_url(clip)},
            timeout=120,
        )
        assert as_json.status_code == 200, as_json.text
        after = scrape(url)

    def delta(a, b, name):
        return value(b, name) - value(a, name)

    assert delta(before, middle, "polyvox_voice_prompt_encodes_total") == 1
    assert delta(middle, after, "polyvox_voice_prompt_encodes_total") == 0
    assert delta(middle, after, "polyvox_voice_prompt_cache_hits_total") >= 1
    first, second = decode(upload.content)[0], decode(as_json.content)[0]
    np.testing.assert_allclose(second, first, atol=1e-4)
