// The playground's start: the tabs (keyboard: arrows, Home, End), the API-key field, and loading
// what the server offers; a server that needs a key the page lacks says so at the top.

import { apiKey, explain } from "./api.js";
import { catalog, catalogEvents, loadConfig, loadVoices } from "./catalog.js";
import { CloneTab } from "./clone.js";
import { CodeTab } from "./code.js";
import { StreamPlayer } from "./player.js";
import { ServerTab } from "./server.js";
import { SpeakTab } from "./speak.js";
import { VoicesTab } from "./voices.js";

const $ = (id) => document.getElementById(id);

const player = new StreamPlayer($("level-meter"));
const speak = new SpeakTab(player);
const server = new ServerTab($("server-badge"));
const code = new CodeTab();

function selectTab(tab, focus = false) {
  for (const other of document.querySelectorAll('[role="tab"]')) {
    const selected = other === tab;
    other.setAttribute("aria-selected", String(selected));
    other.tabIndex = selected ? 0 : -1;
    $(other.getAttribute("aria-controls")).hidden = !selected;
  }
  if (focus) tab.focus();
  server.show(tab.id === "tab-server");
  if (tab.id === "tab-code") code.render();
  history.replaceState(null, "", `#${tab.id.replace("tab-", "")}`);
}

function useVoice(id) {
  speak.selectVoice(id);
  selectTab($("tab-speak"), true);
}

new CloneTab(player, { onVoiceSaved: (id) => speak.selectVoice(id) });
new VoicesTab(player, { onUse: useVoice });

const tabs = [...document.querySelectorAll('[role="tab"]')];
for (const tab of tabs) {
  tab.addEventListener("click", () => selectTab(tab));
  tab.addEventListener("keydown", (event) => {
    const index = tabs.indexOf(tab);
    const next = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: tabs.length - 1 }[event.key];
    if (next === undefined) return;
    event.preventDefault();
    selectTab(tabs[(next + tabs.length) % tabs.length], true);
  });
}

function notice(text) {
  $("notice").hidden = !text;
  $("notice").textContent = text || "";
}

/** Load (or reload, after a new key) everything the tabs show. */
async function start() {
  notice(null);
  server.readiness().catch(() => {});
  try {
    await loadConfig();
    await loadVoices();
  } catch (error) {
    if (error.status === 401) {
      notice(
        apiKey.get()
          ? `The server refused this API key: ${error.message}`
          : "This server requires an API key: enter it in the API key field above.",
      );
      speak.locked(apiKey.get() ? "enter a key the server accepts" : "enter the API key first");
      $("api-key").focus();
    } else if (error.status === 403 && catalog.config) {
      // a key without the voices scope speaks, but may not list the voices: it speaks the default one
      notice(`This key cannot list the voices (${error.message}); it speaks the default voice.`);
      catalog.voices = [{ id: "alloy", name: "Alloy", source: "default voice" }];
      catalogEvents.dispatchEvent(new Event("voices"));
    } else {
      notice(`The server's settings could not be loaded: ${explain(error)}`);
      speak.locked("the server's voices could not be loaded");
    }
  }
}

$("api-key").value = apiKey.get();
$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  apiKey.set($("api-key").value.trim());
  start();
});
$("key-forget").addEventListener("click", () => {
  apiKey.set("");
  $("api-key").value = "";
  start();
});
window.addEventListener("polyvox:unauthorized", () => {
  if (!apiKey.get()) notice("This server requires an API key: enter it in the API key field above.");
});

// The header's readiness badge follows the server (a restart, a drain) while the page is open.
setInterval(() => {
  if (document.visibilityState === "visible") server.readiness().catch(() => {});
}, 10_000);

const initial = $(`tab-${location.hash.slice(1)}`);
selectTab(initial?.getAttribute("role") === "tab" ? initial : $("tab-speak"));
start();
