// The Clone tab: a reference clip from a file or the microphone (MediaRecorder, kept as the WAV it
// decodes to, so its length is exact), its transcript and the speaker's consent; then speak once with
// it (a one-off clone: multipart `custom_voice_file` on POST /v1/audio/speech, played as it streams;
// no consent asked, as the API asks none) or save it as a named voice (the consent box ticked). The
// clip is checked by the API, whose messages (too short, silent, not audio) are shown as they come.

import { ApiError, showError } from "./api.js";
import { catalogEvents, loadVoices, needCloning, savedVoiceId } from "./catalog.js";
import { generationSettings, summary } from "./speak.js";
import { speakOverHttp } from "./speech.js";
import { saveVoice } from "./voice-api.js";

const $ = (id) => document.getElementById(id);
const RECORDING_RATE = 24000; // what a recording is kept at (the server's own output rate)
const NO_CONSENT =
  "Tick “The speaker agreed to have their voice cloned” first: a voice is saved only with the speaker's consent.";

/** Mono 16-bit PCM WAV of `samples` (floats in [-1, 1]) at `rate`. */
function wavFile(samples, rate, name) {
  const view = new DataView(new ArrayBuffer(44 + samples.length * 2));
  const text = (at, value) => [...value].forEach((char, i) => view.setUint8(at + i, char.charCodeAt(0)));
  text(0, "RIFF");
  view.setUint32(4, 36 + samples.length * 2, true);
  text(8, "WAVEfmt ");
  view.setUint32(16, 16, true);
  view.setUint16(20, 1, true); // PCM
  view.setUint16(22, 1, true); // mono
  view.setUint32(24, rate, true);
  view.setUint32(28, rate * 2, true);
  view.setUint16(32, 2, true);
  view.setUint16(34, 16, true);
  text(36, "data");
  view.setUint32(40, samples.length * 2, true);
  samples.forEach((sample, i) => view.setInt16(44 + i * 2, Math.max(-1, Math.min(1, sample)) * 0x7fff, true));
  return new File([view], name, { type: "audio/wav" });
}

/** What the microphone recorded, decoded: a WAV whose length is the audio's (a recorder's own file may
 * not say its length, and starts later than the button was pressed). */
async function decodedRecording(chunks, type) {
  const encoded = await new Blob(chunks, { type }).arrayBuffer();
  const audio = await new OfflineAudioContext(1, 1, RECORDING_RATE).decodeAudioData(encoded);
  return wavFile(audio.getChannelData(0), RECORDING_RATE, "recording.wav");
}

export class CloneTab {
  constructor(player, { onVoiceSaved }) {
    this.player = player;
    this.onVoiceSaved = onVoiceSaved;
    this.clip = null;
    this.recorder = null;
    $("clone-file").addEventListener("change", () => {
      const file = $("clone-file").files[0];
      if (file) this.#useClip(file, `File ${file.name} (${Math.round(file.size / 1024)} KiB).`);
    });
    $("clone-consent").addEventListener("change", () => {
      if ($("clone-error").textContent === NO_CONSENT) showError($("clone-error"), null);
    });
    $("clone-record").addEventListener("click", () => this.record());
    $("clone-record-stop").addEventListener("click", () => this.recorder?.stop());
    $("clone-speak").addEventListener("click", () => this.speakOnce());
    $("clone-save").addEventListener("click", () => this.save());
    // an engine that cannot clone refuses every clip: the tab is disabled and says why
    catalogEvents.addEventListener("config", () =>
      needCloning(document.querySelectorAll("#panel-clone fieldset"), $("clone-note")),
    );
  }

  #useClip(blob, description) {
    this.clip = blob;
    $("clone-clip").textContent = description;
    const preview = $("clone-preview");
    if (preview.src) URL.revokeObjectURL(preview.src);
    preview.src = URL.createObjectURL(blob);
    preview.hidden = false;
  }

  async record() {
    showError($("clone-error"), null);
    if (!navigator.mediaDevices?.getUserMedia || typeof MediaRecorder === "undefined") {
      showError($("clone-error"), new Error("this browser cannot record here (recording needs HTTPS or localhost)"));
      return;
    }
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    } catch (error) {
      showError($("clone-error"), new Error(`the microphone is not available: ${error.message}`));
      return;
    }
    const chunks = [];
    const recorder = new MediaRecorder(stream);
    this.recorder = recorder;
    recorder.ondataavailable = (event) => chunks.push(event.data);
    recorder.onstop = async () => {
      for (const track of stream.getTracks()) track.stop();
      this.recorder = null;
      $("clone-record").disabled = false;
      $("clone-record-stop").disabled = true;
      try {
        const file = await decodedRecording(chunks, recorder.mimeType || "audio/webm");
        const seconds = (file.size - 44) / 2 / RECORDING_RATE;
        $("clone-file").value = ""; // the clip is the recording now, not a file chosen before
        this.#useClip(file, `Recording of ${seconds.toFixed(1)} s.`);
      } catch (error) {
        $("clone-clip").textContent = "The recording could not be read.";
        showError($("clone-error"), new Error(`the browser could not decode the recording: ${error.message}`));
      }
    };
    recorder.start();
    $("clone-clip").textContent = "Recording… press Stop recording when done.";
    $("clone-record").disabled = true;
    $("clone-record-stop").disabled = false;
    $("clone-record-stop").focus();
  }

  #status(text) {
    $("clone-status").textContent = text;
  }

  async speakOnce() {
    showError($("clone-error"), null);
    if (!this.clip) return showError($("clone-error"), new Error("choose or record a clip first"));
    const fields = { input: $("clone-text").value, ...generationSettings() };
    const transcript = $("clone-transcript").value.trim();
    if (transcript) fields.ref_text = transcript;
    $("clone-speak").disabled = true;
    this.#status("Generating…");
    try {
      await this.player.prepare();
      const result = await speakOverHttp({ player: this.player, fields, clip: this.clip });
      this.#status(`Spoken once: ${summary(result)}.`);
    } catch (error) {
      this.#status("Failed.");
      showError($("clone-error"), error);
    } finally {
      $("clone-speak").disabled = false;
    }
  }

  async save() {
    showError($("clone-error"), null);
    if (!$("clone-consent").checked) return showError($("clone-error"), new Error(NO_CONSENT));
    const name = $("clone-name").value.trim();
    this.#status("Saving…");
    $("clone-save").disabled = true;
    try {
      const voice = await saveVoice({
        name,
        clip: this.clip,
        transcript: $("clone-transcript").value.trim(),
        consent: $("clone-consent").checked,
      });
      await loadVoices();
      const id = savedVoiceId(voice, name);
      this.onVoiceSaved(id);
      this.#status(`Saved as voice "${id}": it is now in the Speak tab's voice picker.`);
    } catch (error) {
      this.#status("Not saved.");
      const refusedConsent = error instanceof ApiError && error.code === "consent_required";
      showError($("clone-error"), refusedConsent ? new Error(NO_CONSENT) : error);
    } finally {
      $("clone-save").disabled = false;
    }
  }
}
