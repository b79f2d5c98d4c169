// The Server tab: readiness (GET /ready) and the live figures of GET /metrics, refreshed every two
// seconds while the tab is shown and the page visible, with the last minutes of four of them as small
// charts. Where /metrics is not served (a proxy keeps it internal: the shipped nginx answers 404) the
// tab says so and stops asking.

import { errorOf, showError } from "./api.js";
import { Series, draw } from "./charts.js";
import { parseMetrics, total } from "./prometheus.js";

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 2000;

function number(value, digits = 0) {
  return value === null || Number.isNaN(value) ? "–" : value.toFixed(digits);
}

function percent(share) {
  return share === null || Number.isNaN(share) ? "–" : `${(share * 100).toFixed(1)} %`;
}

const TTFA = "polyvox_time_to_first_audio_seconds";

const CHARTS = {
  throughput: { format: (v) => `${v.toFixed(1)} audio-s/s`, floor: 1 },
  ttfa: { format: (v) => `${v.toFixed(2)} s`, floor: 0.5 },
  queue: { format: (v) => `${v.toFixed(0)}`, floor: 4 },
  running: { format: (v) => `${v.toFixed(0)}`, floor: 4 },
};

/** Why the figures cannot be shown: /metrics answered `status` here. */
class MetricsUnavailable extends Error {
  constructor(status) {
    super(`/metrics answered ${status} here`);
    this.status = status;
  }
}

export class ServerTab {
  constructor(badge) {
    this.badge = badge;
    this.timer = null;
    this.shown = false;
    this.unavailable = false; // /metrics is not served here: no more scrapes
    this.series = Object.fromEntries(Object.keys(CHARTS).map((name) => [name, new Series()]));
    this.previous = null; // the last scrape's counters, for rates
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
    if (this.shown && !this.unavailable && $("server-live").checked && document.visibilityState === "visible") {
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

  async #metrics() {
    const response = await fetch("metrics");
    if (response.status === 404) throw new MetricsUnavailable(response.status); // not served here
    if (!response.ok) throw await errorOf(response); // a failure now: shown, and asked again
    return parseMetrics(await response.text());
  }

  async refresh() {
    if (this.unavailable) {
      this.#renderReady(await this.readiness().catch(() => ({ ready: false, message: "unreachable" })));
      return;
    }
    const [ready, samples] = await Promise.allSettled([this.readiness(), this.#metrics()]);
    if (ready.status === "fulfilled") this.#renderReady(ready.value);
    if (samples.status === "rejected" && samples.reason instanceof MetricsUnavailable) {
      this.#withoutMetrics(samples.reason);
    } else if (samples.status === "fulfilled") {
      this.#render(samples.value);
      $("server-updated").textContent = `Updated ${new Date().toLocaleTimeString()}`;
    }
    // a failure to show: readiness' own, or the scrape's other than /metrics not being served here
    const metricsFailed = samples.status === "rejected" && !this.unavailable;
    showError($("server-error"), ready.reason ?? (metricsFailed ? samples.reason : null));
  }

  /** Say the figures are not available where the page is served from, and stop scraping. */
  #withoutMetrics(error) {
    this.unavailable = true;
    this.#schedule();
    $("server-live").checked = false;
    $("server-live").disabled = true;
    const note = $("server-unavailable");
    note.textContent =
      `The server's figures are not available here: ${error.message} (a proxy in front of polyvox, ` +
      "such as the shipped nginx, keeps /metrics to the internal network). Readiness is still shown; " +
      "ask for the figures where /metrics is served (Prometheus, Grafana).";
    note.hidden = false;
    $("server-charts").hidden = true;
    for (const figure of $("server-figures").querySelectorAll("dd")) {
      if (!["server-ready", "server-engine", "server-model"].includes(figure.id)) figure.closest("div").hidden = true;
    }
    $("server-updated").textContent = "";
  }

  #renderReady(ready) {
    $("server-ready").textContent = ready.ready ? "ready" : `no: ${ready.message}`;
    $("server-engine").textContent = ready.engine || "–";
    $("server-model").textContent = ready.model || "–";
  }

  /** The charts' next points: rates between this scrape and the one before, gauges as they are. */
  #chart(samples) {
    const now = Date.now();
    const counters = {
      t: now,
      audio: total(samples, "polyvox_audio_seconds_total") ?? 0,
      ttfaSum: total(samples, `${TTFA}_sum`) ?? 0,
      ttfaCount: total(samples, `${TTFA}_count`) ?? 0,
    };
    const before = this.previous;
    this.previous = counters;
    this.series.queue.add(now, total(samples, "polyvox_queue_depth"));
    this.series.running.add(now, total(samples, "polyvox_requests_in_flight"));
    if (before && counters.audio >= before.audio) {
      const seconds = (now - before.t) / 1000;
      this.series.throughput.add(now, seconds > 0 ? (counters.audio - before.audio) / seconds : null);
      const answered = counters.ttfaCount - before.ttfaCount;
      this.series.ttfa.add(now, answered > 0 ? (counters.ttfaSum - before.ttfaSum) / answered : null);
    }
    for (const [name, options] of Object.entries(CHARTS)) {
      const figure = document.querySelector(`#server-charts [data-series="${name}"]`);
      draw(figure.querySelector("svg"), this.series[name], now, options);
      const latest = this.series[name].latest();
      figure.querySelector(".now").textContent = latest === null ? "–" : options.format(latest);
    }
  }

  #render(samples) {
    this.#chart(samples);
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
