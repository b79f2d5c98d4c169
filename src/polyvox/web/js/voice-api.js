// Changing voices: POST /v1/audio/voices (multipart: name, audio, transcript, consent) and
// DELETE /v1/audio/voices/{id}. Both need an admin key where the server has admin keys.

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

export async function deleteVoice(id) {
  return (await request(`v1/audio/voices/${encodeURIComponent(id)}`, { method: "DELETE" })).json();
}
