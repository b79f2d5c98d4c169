// What the server offers, loaded once per key and shared by the tabs: its playground config
// (GET /ui/config), models (GET /v1/models) and voices (GET /v1/voices, each voice's details from
// GET /v1/audio/voices/{id}). Tabs listen for "config" and "voices" events on `catalogEvents`.

import { getJSON } from "./api.js";

export const catalog = { config: null, models: [], voices: [] };
export const catalogEvents = new EventTarget();

/** The server's config and model list; throws the ApiError (401 without a needed key). */
export async function loadConfig() {
  const [config, models] = await Promise.all([getJSON("ui/config"), getJSON("v1/models")]);
  catalog.config = config;
  catalog.models = models.data.map((model) => model.id);
  catalogEvents.dispatchEvent(new Event("config"));
}

/** Every voice with its details (description, transcript, duration); a detail that fails to load
 * leaves the voice listed with what /v1/voices said. */
export async function loadVoices() {
  const listing = await getJSON("v1/voices");
  const details = await Promise.all(
    listing.data.map((voice) => getJSON(`v1/audio/voices/${encodeURIComponent(voice.id)}`).catch(() => null)),
  );
  catalog.voices = listing.data.map((voice, i) => ({ ...voice, ...(details[i] || {}), id: voice.id }));
  catalog.defaultVoice = listing.default;
  catalogEvents.dispatchEvent(new Event("voices"));
}

export function voiceById(id) {
  return catalog.voices.find((voice) => voice.id === id) || null;
}

/** The listed id of a voice just created: the answer's `id` when it is listed, else its name. */
export function savedVoiceId(created, name) {
  const listed = catalog.voices.find((voice) => voice.id === created?.id || voice.id === name);
  return listed ? listed.id : created?.id || name;
}

/** What the page says about a voice: its description, transcript and clip length. The embedded
 * engine's builtin names are one speaker's delivery styles, whatever their VoxCPM2 designs say. */
export function aboutVoice(voice) {
  if (voice.source === "builtin" && catalog.config && !catalog.config.can_clone) {
    return "The embedded voice: one speaker; the name picks its delivery.";
  }
  const parts = [];
  if (voice.description) parts.push(voice.description);
  if (voice.transcript) parts.push(`“${voice.transcript}”`);
  if (voice.duration_s) parts.push(`${voice.duration_s.toFixed(1)} s clip`);
  return parts.join(" · ");
}

/** A voice's label: its display name, with its id when that differs by more than case. */
export function voiceLabel(voice) {
  const name = voice.name || voice.id;
  return name.toLowerCase() === voice.id.toLowerCase() ? name : `${name} (${voice.id})`;
}
