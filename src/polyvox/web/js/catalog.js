// What the server offers, loaded once per key and shared by the tabs: its playground config
// (GET /ui/config), models (GET /v1/models) and voices with their details (GET /ui/voices, one call for
// every voice). Tabs listen for "config" and "voices" events on `catalogEvents`.

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

/** Every voice with its details (description, transcript, clip length), in one request. */
export async function loadVoices() {
  const listing = await getJSON("ui/voices");
  catalog.voices = listing.data;
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

/** Whether the engine clones (speaks a clip's voice): Clone, Upload and voice design need it. */
export function canClone() {
  return Boolean(catalog.config?.can_clone);
}

/** Disable `fieldsets` when this engine cannot clone (it would refuse every clip), and say why in
 * `note`. */
export function needCloning(fieldsets, note) {
  const reason = canClone()
    ? ""
    : `The ${catalog.config.engine} engine cannot clone a voice from a clip: serve VoxCPM2 to clone or upload one.`;
  for (const fieldset of fieldsets) fieldset.disabled = Boolean(reason);
  note.textContent = reason;
  note.hidden = !reason;
}

/** What the page says about a voice: the server's description (a builtin voice's design, or the
 * embedded voice's delivery), the prompt it was designed from, its transcript and clip length. */
export function aboutVoice(voice) {
  const parts = [];
  if (voice.description) parts.push(voice.description);
  if (voice.prompt) parts.push(`designed from “${voice.prompt}”`);
  if (voice.transcript) parts.push(`“${voice.transcript}”`);
  if (voice.duration_s) parts.push(`${voice.duration_s.toFixed(1)} s clip`);
  return parts.join(" · ");
}

/** A voice's label: its display name, with its id when that differs by more than case. */
export function voiceLabel(voice) {
  const name = voice.name || voice.id;
  return name.toLowerCase() === voice.id.toLowerCase() ? name : `${name} (${voice.id})`;
}
