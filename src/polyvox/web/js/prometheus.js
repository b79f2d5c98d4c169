// Reading Prometheus' text format (GET /metrics) into samples, and summing them by name and labels.

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Every sample of `text`: {name, labels, value}. Comments and malformed lines are skipped. */
export function parseMetrics(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = SAMPLE.exec(line);
    if (!match) continue;
    const labels = {};
    for (const [, key, value] of (match[2] || "").matchAll(LABEL)) labels[key] = value;
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

/** The sum of the samples called `name` whose labels include `labels`; null when there are none. */
export function total(samples, name, labels = {}) {
  const chosen = samples.filter(
    (sample) => sample.name === name && Object.entries(labels).every(([k, v]) => sample.labels[k] === v),
  );
  return chosen.length ? chosen.reduce((sum, sample) => sum + sample.value, 0) : null;
}
