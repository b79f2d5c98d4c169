// The Code tab: the Speak tab's current request as curl, openai-Python and JavaScript (fetch), ready
// to copy. The key is read from POLYVOX_API_KEY in each snippet, never written into it.

import { apiKey, baseUrl } from "./api.js";
import { speechRequest } from "./speak.js";

const $ = (id) => document.getElementById(id);

// Fields the openai SDK takes as arguments; polyvox's extensions go through `extra_body`.
const OPENAI_FIELDS = new Set(["model", "voice", "input", "instructions", "response_format", "speed", "stream_format"]);

function shellQuote(text) {
  return `'${text.replaceAll("'", "'\\''")}'`;
}

function python(value) {
  if (value === true) return "True";
  if (value === false) return "False";
  if (value === null) return "None";
  if (typeof value === "object") {
    return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${python(v)}`).join(", ")}}`;
  }
  return JSON.stringify(value); // strings and numbers: JSON's spelling is valid Python
}

export function curlSnippet(body, base = baseUrl()) {
  const lines = [`curl -sS ${shellQuote(new URL("v1/audio/speech", base).href)}`];
  if (apiKey.get()) lines.push(`-H "Authorization: Bearer $POLYVOX_API_KEY"`);
  lines.push(`-H 'Content-Type: application/json'`);
  lines.push(`-d ${shellQuote(JSON.stringify(body))}`);
  lines.push(`-o speech.${body.response_format}`);
  return lines.join(" \\\n  ");
}

export function pythonSnippet(body, base = baseUrl()) {
  const args = [];
  const extra = {};
  for (const [name, value] of Object.entries(body)) {
    if (OPENAI_FIELDS.has(name)) args.push(`    ${name}=${python(value)},`);
    else extra[name] = value;
  }
  if (Object.keys(extra).length) args.push(`    extra_body=${python(extra)},`);
  const key = apiKey.get() ? `os.environ["POLYVOX_API_KEY"]` : `os.environ.get("POLYVOX_API_KEY", "unused")`;
  return [
    "import os",
    "",
    "from openai import OpenAI",
    "",
    `client = OpenAI(base_url=${python(new URL("v1", base).href)}, api_key=${key})`,
    "",
    "with client.audio.speech.with_streaming_response.create(",
    ...args,
    ") as response:",
    `    response.stream_to_file(${python(`speech.${body.response_format}`)})`,
  ].join("\n");
}

export function javascriptSnippet(body, base = baseUrl()) {
  const headers = ['    "Content-Type": "application/json",'];
  if (apiKey.get()) headers.push("    Authorization: `Bearer ${process.env.POLYVOX_API_KEY}`,");
  const json = JSON.stringify(body, null, 2).replaceAll("\n", "\n  ");
  return [
    `const response = await fetch(${JSON.stringify(new URL("v1/audio/speech", base).href)}, {`,
    '  method: "POST",',
    "  headers: {",
    ...headers,
    "  },",
    `  body: JSON.stringify(${json}),`,
    "});",
    "if (!response.ok) throw new Error((await response.json()).error.message);",
    `const audio = new Uint8Array(await response.arrayBuffer()); // the ${body.response_format} file`,
  ].join("\n");
}

export class CodeTab {
  constructor() {
    for (const copy of document.querySelectorAll("button.copy")) {
      copy.addEventListener("click", () => this.copy(copy.dataset.copy));
    }
    // Any change to the Speak tab's controls changes the snippets.
    for (const event of ["input", "change"]) document.getElementById("panel-speak").addEventListener(event, () => this.render());
  }

  render() {
    const body = speechRequest();
    $("code-curl").textContent = curlSnippet(body);
    $("code-python").textContent = pythonSnippet(body);
    $("code-js").textContent = javascriptSnippet(body);
  }

  async copy(id) {
    const text = $(id).textContent;
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      // no clipboard API (plain HTTP beyond localhost): select the text for Ctrl+C instead
      const range = document.createRange();
      range.selectNodeContents($(id));
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      $("code-status").textContent = "Selected: press Ctrl+C to copy.";
      return;
    }
    $("code-status").textContent = "Copied.";
  }
}
