// Streaming playback with Web Audio: 16-bit little-endian mono PCM arrives in pieces of any size
// (a fetch body or WebSocket frames); each piece becomes an AudioBuffer scheduled right after the
// previous one, so sound starts with the first chunk. Everything passes through a tap worklet that
// reports what reached the output, shown by the level meter.

const LEAD_S = 0.05; // scheduling margin when playback has caught up with the stream

export class StreamPlayer {
  constructor(meter) {
    this.meter = meter;
    this.context = null;
    this.loading = null;
    this.sources = new Set();
    this.stopped = new Set(); // finished() promises waiting on the playback
    this.tapFrames = 0;
    this.begin(24000);
  }

  /** Create (or resume) the audio graph. Call it from a click: browsers start audio on a gesture. */
  async prepare() {
    if (!this.context) {
      this.context = new AudioContext();
      const url = new URL("./tap-worklet.js", import.meta.url);
      this.loading = this.context.audioWorklet.addModule(url).then(() => {
        this.tap = new AudioWorkletNode(this.context, "polyvox-playback-tap");
        this.tap.connect(this.context.destination);
        this.tap.port.onmessage = (event) => this.#report(event.data);
      });
    }
    await this.context.resume();
    await this.loading;
  }

  /** Start a new utterance of PCM at `rate` Hz, stopping whatever still plays. */
  begin(rate) {
    this.stop();
    this.rate = rate;
    this.samples = 0;
    this.carry = null;
    this.chunks = [];
    this.next = 0;
    this.heardFrom = this.tapFrames;
    this.peak = 0;
    this.#show(0);
  }

  /** Schedule the next bytes of the stream (any length; an odd byte waits for the next piece). */
  push(bytes) {
    if (!bytes.length) return;
    this.chunks.push(bytes);
    let data = bytes;
    if (this.carry !== null) {
      data = new Uint8Array(bytes.length + 1);
      data[0] = this.carry;
      data.set(bytes, 1);
    }
    const count = data.length >> 1;
    this.carry = data.length % 2 ? data[data.length - 1] : null;
    if (!count) return;
    const view = new DataView(data.buffer, data.byteOffset, count * 2);
    const buffer = this.context.createBuffer(1, count, this.rate);
    const channel = buffer.getChannelData(0);
    for (let i = 0; i < count; i++) channel[i] = view.getInt16(i * 2, true) / 32768;
    this.#schedule(buffer);
    this.samples += count;
  }

  #schedule(buffer) {
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.tap);
    const now = this.context.currentTime;
    if (this.next < now + 0.01) this.next = now + LEAD_S;
    source.start(this.next);
    this.next += buffer.duration;
    this.sources.add(source);
    source.onended = () => this.sources.delete(source);
  }

  /** Seconds of audio received for this utterance. */
  get seconds() {
    return this.samples / this.rate;
  }

  /** Resolves with true when everything scheduled has played, or with false as soon as `stop()` ends
   * the playback first. */
  finished() {
    const left = this.context ? Math.max(0, this.next - this.context.currentTime) : 0;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.stopped.delete(stopped);
        resolve(true);
      }, left * 1000 + 100);
      const stopped = () => {
        clearTimeout(timer);
        resolve(false);
      };
      this.stopped.add(stopped);
    });
  }

  /** The utterance's PCM as received (for a pcm download). */
  pcm() {
    return new Blob(this.chunks, { type: `audio/pcm;rate=${this.rate};channels=1` });
  }

  stop() {
    for (const source of this.sources) {
      try {
        source.stop();
      } catch {
        // a source that never started cannot stop; it is dropped all the same
      }
    }
    this.sources.clear();
    for (const resolve of this.stopped) resolve();
    this.stopped.clear();
    if (this.context) this.next = this.context.currentTime;
  }

  #report({ frames, peak }) {
    this.tapFrames = frames;
    this.peak = Math.max(this.peak, peak);
    this.#show(peak);
  }

  #show(level) {
    if (!this.meter) return;
    const heard = this.context ? (this.tapFrames - this.heardFrom) / this.context.sampleRate : 0;
    this.meter.querySelector(".meter-bar").style.width = `${Math.min(1, level) * 100}%`;
    this.meter.setAttribute("aria-valuenow", level.toFixed(2));
    this.meter.dataset.heardSeconds = heard.toFixed(3);
    this.meter.dataset.peak = this.peak.toFixed(4);
  }
}

/** The sample rate a PCM response declares (`audio/pcm;rate=24000;channels=1`), or null. */
export function pcmRate(contentType) {
  const match = /rate=(\d+)/.exec(contentType || "");
  return match ? Number(match[1]) : null;
}
