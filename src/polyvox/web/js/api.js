// Talking to the server: the API key (session storage only), requests that carry it, and API
// errors turned into exceptions that keep the server's message. Paths are relative to the page, so
// the playground works behind a reverse proxy that serves polyvox under a prefix.

const KEY_STORAGE = "polyvox.apiKey";

export const apiKey = {
  get() {
    return sessionStorage.getItem(KEY_STORAGE) || "";
  },
  set(key) {
    if (key) sessionStorage.setItem(KEY_STORAGE, key);
    else sessionStorage.removeItem(KEY_STORAGE);
  },
};

/** An error answered by the API, in OpenAI's shape: {"error": {"message", "type", "param", "code"}}. */
export class ApiError extends Error {
  constructor(status, error, fallback) {
    super(error?.message || fallback || `HTTP ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.code = error?.code ?? null;
    this.param = error?.param ?? null;
    this.type = error?.type ?? null;
  }
}

/** The ApiError of a failed response (its body read as OpenAI's error shape when it is one). */
export async function errorOf(response) {
  let body = null;
  const text = await response.text().catch(() => "");
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  const fallback = text && !body ? `${response.status} ${response.statusText}: ${text.slice(0, 300)}` : null;
  const error = new ApiError(response.status, body?.error, fallback || `${response.status} ${response.statusText}`);
  if (response.status === 401) window.dispatchEvent(new CustomEvent("polyvox:unauthorized", { detail: error }));
  return error;
}

/** Headers for an API call: the bearer key when one is set. */
export function authHeaders(extra = {}) {
  const headers = new Headers(extra);
  const key = apiKey.get();
  if (key) headers.set("Authorization", `Bearer ${key}`);
  return headers;
}

/**
 * fetch() against the API: `json` sends a JSON body, `form` a FormData; a non-2xx answer throws
 * its ApiError. Network failures throw as fetch does.
 */
export async function request(path, { method = "GET", json, form, signal, headers } = {}) {
  const init = { method, signal, headers: authHeaders(headers) };
  if (json !== undefined) {
    init.body = JSON.stringify(json);
    init.headers.set("Content-Type", "application/json");
  } else if (form !== undefined) {
    init.body = form;
  }
  const response = await fetch(path, init);
  if (!response.ok) throw await errorOf(response);
  return response;
}

export async function getJSON(path, options) {
  return (await request(path, options)).json();
}

/** A one-line explanation of an error for the page: the API's message, its status and code, and
 * what to do where the page knows (keys). */
export function explain(error) {
  if (error?.name === "AbortError") return "Stopped.";
  if (!(error instanceof ApiError)) return `${error?.message || error}`;
  const tags = [error.status, error.code].filter(Boolean).join(" ");
  let text = `${error.message} (${tags}${error.param ? `, param: ${error.param}` : ""})`;
  if (error.status === 401) text += "\nThis server needs an API key: enter it at the top of the page.";
  if (error.status === 403) text += "\nThis action needs an admin key: enter one at the top of the page.";
  return text;
}

/** Show `error` (or hide the box when it is null) in a role="alert" element. */
export function showError(element, error) {
  element.hidden = !error;
  element.textContent = error ? explain(error) : "";
}

/** The page's base URL, for the Code tab (and WebSocket URLs): where /v1 lives. */
export function baseUrl() {
  return new URL("./", document.baseURI);
}
