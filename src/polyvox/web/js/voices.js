// The Voices tab: every voice with what the API says about it; play a sample (a short sentence in
// that voice, streamed), use it in the Speak tab, rename or delete a stored voice, upload a new one or
// design one from a description.

import { showError } from "./api.js";
import { aboutVoice, catalog, catalogEvents, loadVoices, needCloning, savedVoiceId, voiceLabel } from "./catalog.js";
import { generationSettings, summary } from "./speak.js";
import { speakOverHttp } from "./speech.js";
import { deleteVoice, designVoice, renameVoice, saveVoice } from "./voice-api.js";

const $ = (id) => document.getElementById(id);

function button(label, name, onClick) {
  const element = document.createElement("button");
  element.type = "button";
  element.textContent = label;
  element.setAttribute("aria-label", `${label} ${name}`);
  element.addEventListener("click", onClick);
  return element;
}

export class VoicesTab {
  constructor(player, { onUse }) {
    this.player = player;
    this.onUse = onUse;
    $("voices-refresh").addEventListener("click", () => this.refresh());
    $("upload-button").addEventListener("click", () => this.upload());
    $("design-button").addEventListener("click", () => this.design());
    catalogEvents.addEventListener("voices", () => this.#render());
    catalogEvents.addEventListener("config", () => needCloning([$("upload-voice")], $("upload-note")));
  }

  #status(text) {
    $("voices-status").textContent = text;
  }

  async refresh() {
    showError($("voices-error"), null);
    try {
      await loadVoices();
      this.#status(`${catalog.voices.length} voices.`);
    } catch (error) {
      showError($("voices-error"), error);
    }
  }

  #render() {
    const rows = catalog.voices.map((voice) => {
      const row = document.createElement("tr");
      row.dataset.voice = voice.id;
      const name = document.createElement("th");
      name.scope = "row";
      name.textContent = voiceLabel(voice);
      const source = document.createElement("td");
      source.className = "source";
      source.textContent = voice.source;
      const description = document.createElement("td");
      description.textContent = aboutVoice(voice);
      const actions = document.createElement("td");
      actions.className = "actions-cell";
      actions.append(
        button("Play sample", voice.id, () => this.sample(voice.id)),
        button("Use", voice.id, () => this.onUse(voice.id)),
      );
      if (voice.source !== "builtin") {
        actions.append(
          button("Rename", voice.id, () => this.rename(voice)),
          button("Delete", voice.id, () => this.remove(voice.id)),
        );
      }
      row.append(name, source, description, actions);
      return row;
    });
    $("voices-table").tBodies[0].replaceChildren(...rows);
  }

  async sample(id) {
    showError($("voices-error"), null);
    this.#status(`Speaking a sample of ${id}…`);
    const body = { ...generationSettings(), input: `Hello, this is the voice ${id}.`, voice: id };
    try {
      await this.player.prepare();
      const result = await speakOverHttp({ player: this.player, body });
      this.#status(`Sample of ${id}: ${summary(result)}.`);
    } catch (error) {
      this.#status(`No sample of ${id}.`);
      showError($("voices-error"), error);
    }
  }

  async rename(voice) {
    showError($("voices-error"), null);
    const name = window.prompt(`New name for the voice "${voice.id}" (its id stays):`, voice.name || voice.id);
    if (name === null) return;
    try {
      const renamed = await renameVoice(voice.id, name);
      await loadVoices();
      this.#status(`Renamed ${voice.id} to "${renamed.name}".`);
    } catch (error) {
      this.#status(`Not renamed.`);
      showError($("voices-error"), error);
    }
  }

  async remove(id) {
    showError($("voices-error"), null);
    if (!window.confirm(`Delete the voice "${id}"? Its clip is removed from the server.`)) return;
    try {
      await deleteVoice(id);
      await loadVoices();
      this.#status(`Deleted ${id}.`);
    } catch (error) {
      showError($("voices-error"), error);
    }
  }

  async upload() {
    showError($("voices-error"), null);
    const name = $("upload-name").value.trim();
    this.#status("Uploading…");
    try {
      const created = await saveVoice({
        name,
        clip: $("upload-file").files[0],
        transcript: $("upload-transcript").value.trim(),
        consent: $("upload-consent").checked,
      });
      await loadVoices();
      this.#status(`Uploaded "${savedVoiceId(created, name)}".`);
    } catch (error) {
      this.#status("Not uploaded.");
      showError($("voices-error"), error);
    }
  }

  async design() {
    showError($("voices-error"), null);
    const name = $("design-name").value.trim();
    this.#status(`Designing "${name}"…`);
    $("design-button").disabled = true;
    try {
      const created = await designVoice({ name, prompt: $("design-prompt").value.trim() });
      await loadVoices();
      this.#status(`Designed "${savedVoiceId(created, name)}".`);
    } catch (error) {
      this.#status("Not designed.");
      showError($("voices-error"), error);
    } finally {
      $("design-button").disabled = false;
    }
  }
}
