// Changing voices: POST /v1/audio/voices from a clip (multipart: name, audio, transcript, consent) or
// from a description (type=prompt, name, prompt), POST /v1/audio/voices/{id} to rename one, and
// DELETE /v1/audio/voices/{id}. Each needs an admin key where the server has admin keys.

import { request } from "./api.js";

/** Store `clip` as the voice `name`; the API checks the clip (length, silence, decodable) and consent. */
export async function saveVoice({ name, clip, transcript, consent }) {
  const form = new FormData();
  form.append("name", name);
  if (clip) form.append("audio", clip, clip.name || "clip");
  if (transcript) form.append("transcript", transcript);
  form.append("consent", consent ? "true" : "false");
  return (await request("v1/audio/voices", { method: "POST", form })).json();
}

/** Give the stored voice `id` a new display name; its id, clip and settings stay. */
export async function renameVoice(id, name) {
  const path = `v1/audio/voices/${encodeURIComponent(id)}`;
  return (await request(path, { method: "POST", json: { name } })).json();
}

export async function deleteVoice(id) {
  return (await request(`v1/audio/voices/${encodeURIComponent(id)}`, { method: "DELETE" })).json();
}

/** Have the engine design the voice `name` from `prompt`, a description (VoxCPM2; others answer 422). */
export async function designVoice({ name, prompt }) {
  const form = new FormData();
  form.append("type", "prompt");
  form.append("name", name);
  form.append("prompt", prompt);
  return (await request("v1/audio/voices", { method: "POST", form })).json();
}
