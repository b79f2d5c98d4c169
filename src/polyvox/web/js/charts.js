// The Server tab's small charts: a few minutes of the figures each /metrics scrape gives (rates come
// from two scrapes' counters), drawn as inline SVG lines, no chart library.

const WINDOW_MS = 5 * 60 * 1000; // what a chart shows: the last five minutes
const WIDTH = 240;
const HEIGHT = 64;
const SVG = "http://www.w3.org/2000/svg";

/** Points {t, value} of one figure over the last minutes; a null value is a gap (no data then). */
export class Series {
  constructor() {
    this.points = [];
  }

  add(t, value) {
    this.points.push({ t, value });
    while (this.points.length && this.points[0].t < t - WINDOW_MS) this.points.shift();
  }

  latest() {
    for (let i = this.points.length - 1; i >= 0; i--) if (this.points[i].value !== null) return this.points[i].value;
    return null;
  }
}

function element(name, attributes = {}) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  return node;
}

function span(ms) {
  return ms < 90_000 ? `last ${Math.round(ms / 1000)} s` : `last ${Math.round(ms / 60_000)} min`;
}

/** Draw `series` in `svg`: its time axis from its first point (at most five minutes back) to `now`,
 * its value axis from 0 to the largest value (at least `floor`), labelled with `format`. */
export function draw(svg, series, now, { format, floor = 1 }) {
  const values = series.points.map((point) => point.value).filter((value) => value !== null);
  const top = Math.max(floor, ...values);
  const start = Math.max(now - WINDOW_MS, series.points[0]?.t ?? now);
  const x = (t) => (now > start ? (WIDTH * (t - start)) / (now - start) : WIDTH);
  const y = (value) => HEIGHT - 2 - ((HEIGHT - 14) * value) / top;
  svg.setAttribute("viewBox", `0 0 ${WIDTH} ${HEIGHT}`);
  const runs = [[]]; // a line per stretch of data; a gap (null) breaks it
  for (const point of series.points) {
    if (point.value === null) runs.push([]);
    else runs.at(-1).push(`${x(point.t).toFixed(1)},${y(point.value).toFixed(1)}`);
  }
  const lines = runs
    .filter((run) => run.length)
    .map((run) =>
      run.length === 1
        ? element("circle", { cx: run[0].split(",")[0], cy: run[0].split(",")[1], r: 1.5, class: "dot" })
        : element("polyline", { points: run.join(" "), class: "line", "vector-effect": "non-scaling-stroke" }),
    );
  const scale = element("text", { x: 2, y: 9, class: "scale" });
  scale.textContent = format(top);
  const time = element("text", { x: WIDTH - 2, y: 9, class: "scale", "text-anchor": "end" });
  time.textContent = span(now - start);
  const axis = element("line", { x1: 0, x2: WIDTH, y1: HEIGHT - 2, y2: HEIGHT - 2, class: "axis" });
  svg.replaceChildren(axis, scale, time, ...lines);
  svg.dataset.points = String(values.length);
}
