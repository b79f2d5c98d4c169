// The Server tab: readiness (GET /ready) and the live figures of GET /metrics, refreshed every two
// seconds while the tab is shown and the page visible.

import { errorOf, showError } from "./api.js";
import { parseMetrics, total } from "./prometheus.js";

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 2000;

function number(value, digits = 0) {
  return value === null || Number.isNaN(value) ? "–" : value.toFixed(digits);
}

function percent(share) {
  return share === null || Number.isNaN(share) ? "–" : `${(share * 100).toFixed(1)} %`;
}

export class ServerTab {
  constructor(badge) {
    this.badge = badge;
    this.timer = null;
    this.shown = false;
    $("server-live").addEventListener("change", () => this.#schedule());
    document.addEventListener("visibilitychange", () => this.#schedule());
  }

  show(shown) {
    this.shown = shown;
    if (shown) this.refresh();
    this.#schedule();
  }

  #schedule() {
    clearInterval(this.timer);
    this.timer = null;
    if (this.shown && $("server-live").checked && document.visibilityState === "visible") {
      this.timer = setInterval(() => this.refresh(), REFRESH_MS);
    }
  }

  /** Readiness, for the header's badge and this tab. */
  async readiness() {
    const response = await fetch("ready");
    if (response.ok) {
      const ready = await response.json();
      this.badge.textContent = `ready · ${ready.engine} · ${ready.model}`;
      this.badge.classList.add("ready");
      return { ready: true, ...ready };
    }
    const error = await errorOf(response);
    this.badge.textContent = `not ready: ${error.message}`;
    this.badge.classList.remove("ready");
    return { ready: false, message: error.message };
  }

  async refresh() {
    try {
      const [ready, metrics] = await Promise.all([this.readiness(), fetch("metrics").then((r) => r.text())]);
      this.#render(ready, parseMetrics(metrics));
      showError($("server-error"), null);
      $("server-updated").textContent = `Updated ${new Date().toLocaleTimeString()}`;
    } catch (error) {
      showError($("server-error"), error);
    }
  }

  #render(ready, samples) {
    $("server-ready").textContent = ready.ready ? "ready" : `no: ${ready.message}`;
    $("server-engine").textContent = ready.engine || "–";
    $("server-model").textContent = ready.model || "–";
    $("server-queue").textContent = number(total(samples, "polyvox_queue_depth"));
    const engineRunning = total(samples, "polyvox_engine_running_requests");
    const running = number(total(samples, "polyvox_requests_in_flight"));
    $("server-running").textContent = engineRunning === null ? running : `${running} (engine batch: ${engineRunning})`;
    const batch = total(samples, "polyvox_engine_batch_size");
    // Over every data-parallel rank: patches over steps, both summed (the ranks' own means do not add up).
    const steps = total(samples, "polyvox_engine_steps_total");
    const batchMean = steps ? total(samples, "polyvox_engine_patches_total") / steps : 0;
    $("server-batch").textContent = batch === null ? "–" : `${number(batch)} / ${number(batchMean, 1)}`;
    const used = total(samples, "polyvox_engine_kv_blocks_used");
    const free = total(samples, "polyvox_engine_kv_blocks_free");
    $("server-kv").textContent =
      used === null ? "–" : `${percent(used / Math.max(1, used + free))} (${used} of ${used + free} blocks)`;
    // Over every data-parallel rank: hits over lookups, both summed (the ranks' own rates do not add up).
    const queries = total(samples, "polyvox_engine_prefix_cache_queries_total");
    const prefixHits = total(samples, "polyvox_engine_prefix_cache_hits_total") ?? 0;
    $("server-prefix").textContent = queries ? `${percent(prefixHits / queries)} of ${queries} blocks` : "no lookups yet";
    if (queries === null) $("server-prefix").textContent = "–";
    const lookups = total(samples, "polyvox_cache_lookups_total");
    const hits = total(samples, "polyvox_cache_lookups_total", { result: "hit" }) || 0;
    $("server-audio-cache").textContent = lookups ? `${percent(hits / lookups)} of ${lookups} requests` : "–";
    $("server-audio").textContent = `${number(total(samples, "polyvox_audio_seconds_total"), 1)} s`;
    $("server-requests").textContent = number(total(samples, "polyvox_requests_total"));
    $("server-errors").textContent = number(total(samples, "polyvox_errors_total") ?? 0);
  }
}
