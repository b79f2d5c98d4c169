// The Clone tab: a reference clip from a file or the microphone (MediaRecorder), its transcript and
// the speaker's consent; then speak once with it (a one-off clone: multipart `custom_voice_file` on
// POST /v1/audio/speech, played as it streams) or save it as a named voice. The clip is checked by
// the API, whose messages (too short, silent, not audio) are shown as they come.

import { showError } from "./api.js";
import { catalogEvents, loadVoices, needCloning, savedVoiceId } from "./catalog.js";
import { generationSettings, summary } from "./speak.js";
import { speakOverHttp } from "./speech.js";
import { saveVoice } from "./voice-api.js";

const $ = (id) => document.getElementById(id);

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
    const started = performance.now();
    recorder.ondataavailable = (event) => chunks.push(event.data);
    recorder.onstop = () => {
      for (const track of stream.getTracks()) track.stop();
      const type = recorder.mimeType || "audio/webm";
      const extension = type.includes("ogg") ? "ogg" : type.includes("mp4") ? "m4a" : "webm";
      const seconds = (performance.now() - started) / 1000;
      const file = new File(chunks, `recording.${extension}`, { type });
      this.#useClip(file, `Recording of ${seconds.toFixed(1)} s.`);
      this.recorder = null;
      $("clone-record").disabled = false;
      $("clone-record-stop").disabled = true;
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
    if (!$("clone-consent").checked) {
      return showError($("clone-error"), new Error("tick consent: the speaker must have agreed to be cloned"));
    }
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
      showError($("clone-error"), error);
    } finally {
      $("clone-save").disabled = false;
    }
  }
}
