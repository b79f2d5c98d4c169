// One speech request played as it streams: over HTTP (`POST /v1/audio/speech`, chunked PCM) or over
// the WebSocket route, with the figures the page shows: time to first audio, total time, audio
// seconds and the cache header. Errors are the API's own (ApiError), never swallowed.

import { ApiError, apiKey, authHeaders, baseUrl, errorOf } from "./api.js";
import { pcmRate } from "./player.js";

const SPEECH_PATH = "v1/audio/speech";
const SOCKET_PATH = "v1/audio/speech/ws";
const DEFAULT_PCM_RATE = 24000;

/** The streamed (PCM) variant of a speech request body: what the player plays. */
export function streamedBody(body) {
  return { ...body, response_format: "pcm", stream_format: "audio" };
}

function fieldsAsForm(fields, form = new FormData()) {
  for (const [name, value] of Object.entries(fields)) {
    if (value !== undefined && value !== null) form.append(name, String(value));
  }
  return form;
}

/**
 * Send `body` (a JSON speech request) or `fields` + `clip` (a one-off clone, multipart) and play the
 * PCM stream as it arrives. Resolves with the figures once the last byte is in.
 */
export async function speakOverHttp({ player, body, fields, clip, signal, onFirstAudio }) {
  const started = performance.now();
  const init = { method: "POST", signal, headers: authHeaders() };
  if (clip) {
    const form = fieldsAsForm(streamedBody(fields));
    form.append("custom_voice_file", clip, clip.name || "clip");
    init.body = form;
  } else {
    init.body = JSON.stringify(streamedBody(body));
    init.headers.set("Content-Type", "application/json");
  }
  const response = await fetch(SPEECH_PATH, init);
  if (!response.ok) throw await errorOf(response);
  const rate = pcmRate(response.headers.get("content-type")) || (body || fields).sample_rate || DEFAULT_PCM_RATE;
  player.begin(rate);
  let firstAudio = null;
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (firstAudio === null && value.length) {
        firstAudio = (performance.now() - started) / 1000;
        onFirstAudio?.(firstAudio);
      }
      player.push(value);
    }
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new Error(`the audio stream was cut before its end (${error.message}); the server logs say why`);
  }
  return {
    firstAudio,
    total: (performance.now() - started) / 1000,
    seconds: player.seconds,
    cache: response.headers.get("x-cache"),
    requestId: response.headers.get("x-request-id"),
  };
}

function base64url(text) {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

/** The subprotocols a browser offers: `polyvox`, and its key as `polyvox.key.<base64url>`. */
export function socketProtocols() {
  const key = apiKey.get();
  return key ? ["polyvox", `polyvox.key.${base64url(key)}`] : ["polyvox"];
}

function socketUrl() {
  const url = new URL(SOCKET_PATH, baseUrl());
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url;
}

/**
 * Speak `body.input` over `/v1/audio/speech/ws`: config, the text, end; binary PCM frames are played
 * as they come. Resolves at the server's `done`; an `error` message rejects with the API's error.
 */
export function speakOverWebSocket({ player, body, signal, onFirstAudio }) {
  const { input, stream_format: _ignored, ...config } = streamedBody(body);
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let firstAudio = null;
    let opened = false;
    let settled = false;
    const socket = new WebSocket(socketUrl(), socketProtocols());
    socket.binaryType = "arraybuffer";
    const finish = (error, result) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", abort);
      if (socket.readyState <= WebSocket.OPEN) socket.close();
      if (error) reject(error);
      else resolve(result);
    };
    const abort = () => {
      if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "cancel" }));
      finish(new DOMException("stopped", "AbortError"));
    };
    signal?.addEventListener("abort", abort);
    socket.onopen = () => {
      opened = true;
      socket.send(JSON.stringify({ type: "config", ...config }));
      socket.send(JSON.stringify({ type: "text", text: input }));
      socket.send(JSON.stringify({ type: "end" }));
    };
    socket.onmessage = (event) => {
      if (typeof event.data !== "string") {
        const bytes = new Uint8Array(event.data);
        if (firstAudio === null && bytes.length) {
          firstAudio = (performance.now() - started) / 1000;
          onFirstAudio?.(firstAudio);
        }
        player.push(bytes);
        return;
      }
      const message = JSON.parse(event.data);
      if (message.type === "ready") player.begin(message.sample_rate || DEFAULT_PCM_RATE);
      else if (message.type === "error") finish(new ApiError(null, message.error));
      else if (message.type === "done") {
        const total = (performance.now() - started) / 1000;
        finish(null, { firstAudio, total, seconds: player.seconds, cache: null, requestId: null });
      }
    };
    socket.onclose = (event) => {
      if (!opened) {
        finish(
          new Error(
            "the WebSocket handshake was refused (a browser is not told why: a missing or wrong API key is the usual cause)",
          ),
        );
      } else {
        finish(new Error(`the WebSocket closed before the end (code ${event.code}${event.reason ? `: ${event.reason}` : ""})`));
      }
    };
  });
}
