// The Speak tab: the request's controls, speaking with streamed playback (HTTP or WebSocket), the
// figures of the last request, and the download of the finished file in the chosen format.
// `speechRequest()` is the request these controls describe; the Clone and Code tabs read it too.

import { errorOf, authHeaders, showError } from "./api.js";
import { aboutVoice, canClone, catalog, catalogEvents, voiceById, voiceLabel } from "./catalog.js";
import { speakOverHttp, speakOverWebSocket } from "./speech.js";

const $ = (id) => document.getElementById(id);

function characters(text) {
  return [...text].length; // code points, as the server counts them
}

/** The generation settings every speech request of the page shares (Speak, Clone, voice samples). */
export function generationSettings() {
  const settings = {};
  if ($("speak-model").value) settings.model = $("speak-model").value;
  settings.speed = Number($("speak-speed").value);
  const pitch = Number($("speak-pitch").value);
  if (pitch !== 0) settings.pitch = pitch;
  const emotion = $("speak-emotion").value;
  if (emotion) settings.emotion = emotion;
  const rate = $("speak-sample-rate").value;
  if (rate) settings.sample_rate = Number(rate);
  const seed = $("speak-seed").value.trim();
  if (seed !== "") settings.seed = Number(seed);
  const normalize = $("speak-normalize").value;
  if (normalize) settings.normalize = normalize === "true";
  if (canClone()) {
    // an engine that clones (VoxCPM2) is the one that takes cfg_value and inference_timesteps
    const cfg = $("speak-cfg").value.trim();
    if (cfg !== "") settings.cfg_value = Number(cfg);
    const steps = $("speak-timesteps").value.trim();
    if (steps !== "") settings.inference_timesteps = Number(steps);
  }
  return settings;
}

/** The speech request the Speak tab's controls describe, in the chosen download format. */
export function speechRequest() {
  const { model, ...settings } = generationSettings();
  const body = { model, input: $("speak-input").value, voice: $("speak-voice").value || "alloy" };
  if (model === undefined) delete body.model;
  const instructions = $("speak-instructions").value.trim();
  if (canClone() && instructions) body.instructions = instructions;
  body.response_format = $("speak-format").value;
  return { ...body, ...settings };
}

export function formatSeconds(seconds) {
  return seconds === null || seconds === undefined ? "–" : `${seconds.toFixed(2)} s`;
}

/** "first audio 0.21 s · RTF 0.40 · 2.35 s of audio": the figures of one streamed request. */
export function summary(result) {
  const rtf = result.seconds > 0 ? (result.total / result.seconds).toFixed(2) : "–";
  return `first audio ${formatSeconds(result.firstAudio)} · RTF ${rtf} · ${formatSeconds(result.seconds)} of audio`;
}

function saveBlob(blob, filename) {
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = filename;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export class SpeakTab {
  constructor(player) {
    this.player = player;
    this.controller = null;
    this.last = null; // the last request that finished, for its download
    this.available = false; // the server's models and voices are loaded: Speak can send a request
    $("speak-button").addEventListener("click", () => this.speak());
    $("stop-button").addEventListener("click", () => this.stop());
    $("download-button").addEventListener("click", () => this.download());
    $("speak-input").addEventListener("input", () => this.#count());
    $("speak-input").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        this.speak();
      }
    });
    $("speak-speed").addEventListener("input", () => {
      $("speak-speed-value").textContent = `${Number($("speak-speed").value).toFixed(2)}×`;
    });
    $("speak-pitch").addEventListener("input", () => {
      $("speak-pitch-value").textContent = `${$("speak-pitch").value} semitones`;
    });
    $("speak-voice").addEventListener("change", () => this.#describeVoice());
    $("speak-format").addEventListener("change", () => {
      $("download-button").textContent = `Download ${$("speak-format").value}`;
    });
    $("download-button").textContent = `Download ${$("speak-format").value}`;
    catalogEvents.addEventListener("config", () => this.#configure());
    catalogEvents.addEventListener("voices", () => this.#fillVoices());
    this.#count();
  }

  #configure() {
    const config = catalog.config;
    const models = $("speak-model");
    models.replaceChildren(...catalog.models.map((id) => new Option(id, id)));
    models.value = config.model;
    const emotions = $("speak-emotion");
    emotions.replaceChildren(new Option("the voice's", ""), ...config.emotions.map((name) => new Option(name, name)));
    for (const element of document.querySelectorAll(".voxcpm")) element.hidden = !config.can_clone;
    // (hidden in the page until this config says the engine has them: VoxCPM2's controls)
    $("design-note").hidden = config.can_clone;
    $("speak-cfg").placeholder = `server default ${config.cfg_value}`;
    $("speak-timesteps").placeholder = `server default ${config.inference_timesteps}`;
    const others = config.default_sample_rate;
    $("speak-sample-rate").options[0].textContent =
      others === 24000 ? "server default (24000)" : `server default (pcm 24000, others ${others})`;
    this.#count();
    this.#describeVoice();
  }

  #fillVoices() {
    const select = $("speak-voice");
    const previous = select.value || catalog.defaultVoice;
    const groups = new Map();
    for (const voice of catalog.voices) {
      if (!groups.has(voice.source)) {
        const group = document.createElement("optgroup");
        group.label = voice.source;
        groups.set(voice.source, group);
      }
      groups.get(voice.source).append(new Option(voiceLabel(voice), voice.id));
    }
    select.replaceChildren(...groups.values());
    if (catalog.voices.some((voice) => voice.id === previous)) select.value = previous;
    this.#describeVoice();
    this.available = true;
    if (!this.controller) $("speak-button").disabled = false;
    if (this.lockedText === $("speak-status").textContent) $("speak-status").textContent = "";
    this.lockedText = null;
  }

  /** The server's voices cannot be listed (it needs a key the page lacks, say): Voice and Model say
   * `reason`, Speak is off, and no engine's own controls are shown. */
  locked(reason) {
    this.available = false;
    for (const id of ["speak-voice", "speak-model"]) $(id).replaceChildren(new Option(reason, ""));
    for (const element of document.querySelectorAll(".voxcpm")) element.hidden = true;
    $("design-note").hidden = true;
    $("voice-description").textContent = "";
    $("speak-button").disabled = true;
    $("speak-status").textContent = this.lockedText = `${reason[0].toUpperCase()}${reason.slice(1)}.`;
  }

  /** Select voice `id` (after it was added, say). */
  selectVoice(id) {
    $("speak-voice").value = id;
    this.#describeVoice();
  }

  #describeVoice() {
    const id = $("speak-voice").value;
    const voice = voiceById(id);
    $("voice-description").textContent = voice ? aboutVoice(voice) : "";
    const config = catalog.config;
    const mode = config ? config.instructions_mode_by_voice[id] || config.instructions_mode : "design";
    $("instructions-note").textContent =
      mode === "ignore" ? `This server ignores instructions for this voice (instructions_mode: ignore).` : "";
  }

  #count() {
    const count = characters($("speak-input").value);
    const limit = catalog.config?.max_input_chars;
    const counter = $("speak-count");
    counter.textContent = limit ? `${count} / ${limit} characters` : `${count} characters`;
    counter.classList.toggle("over", Boolean(limit) && count > limit);
  }

  #busy(busy) {
    $("speak-button").disabled = busy;
    $("stop-button").disabled = !busy;
  }

  async speak() {
    if (this.controller || !this.available) return;
    showError($("speak-error"), null);
    this.controller = new AbortController();
    this.#busy(true);
    $("download-button").disabled = true;
    for (const id of ["speak-ttfa", "speak-rtf", "speak-duration", "speak-cache"]) $(id).textContent = "–";
    $("speak-status").textContent = "Generating…";
    const body = speechRequest();
    const transport = $("speak-transport").value;
    try {
      await this.player.prepare();
      const run = transport === "websocket" ? speakOverWebSocket : speakOverHttp;
      const result = await run({
        player: this.player,
        body,
        signal: this.controller.signal,
        onFirstAudio: (seconds) => {
          $("speak-ttfa").textContent = formatSeconds(seconds);
          $("speak-status").textContent = "Playing while it generates…";
        },
      });
      $("speak-duration").textContent = formatSeconds(result.seconds);
      $("speak-rtf").textContent = result.seconds > 0 ? (result.total / result.seconds).toFixed(2) : "–";
      $("speak-cache").textContent = result.cache || (transport === "websocket" ? "n/a (WebSocket)" : "–");
      this.last = { body, pcm: this.player.pcm() };
      $("download-button").disabled = false;
      $("speak-status").textContent = `Generated in ${formatSeconds(result.total)}; playing…`;
      const played = await this.player.finished();
      $("speak-status").textContent = played ? `Done: ${summary(result)}.` : "Stopped.";
    } catch (error) {
      $("speak-status").textContent = error.name === "AbortError" ? "Stopped." : "Failed.";
      if (error.name !== "AbortError") showError($("speak-error"), error);
    } finally {
      this.controller = null;
      this.#busy(false);
    }
  }

  stop() {
    this.controller?.abort();
    this.player.stop();
  }

  /** The last request's file in the chosen format: the PCM received for pcm, else the same request
   * in that format (the audio cache serves it without a second synthesis when caching is on). */
  async download() {
    if (!this.last) return;
    showError($("speak-error"), null);
    const format = $("speak-format").value;
    if (format === "pcm") {
      saveBlob(this.last.pcm, "speech.pcm");
      return;
    }
    const button = $("download-button");
    button.disabled = true;
    $("speak-status").textContent = `Fetching the ${format} file…`;
    try {
      const response = await fetch("v1/audio/speech", {
        method: "POST",
        headers: authHeaders({ "Content-Type": "application/json" }),
        body: JSON.stringify({ ...this.last.body, response_format: format }),
      });
      if (!response.ok) throw await errorOf(response);
      saveBlob(await response.blob(), `speech.${format}`);
      const cache = response.headers.get("x-cache");
      $("speak-status").textContent = `Downloaded speech.${format}${cache ? ` (X-Cache: ${cache})` : ""}.`;
    } catch (error) {
      showError($("speak-error"), error);
      $("speak-status").textContent = "Download failed.";
    } finally {
      button.disabled = false;
    }
  }
}
