// An AudioWorklet that passes audio through unchanged and reports what went through it: the frames
// during which some source was playing, and the peak level since the last report. The page's level
// meter and its "heard" figure read these, so they measure audio that reached the output.

class PlaybackTap extends AudioWorkletProcessor {
  constructor() {
    super();
    this.frames = 0;
    this.peak = 0;
    this.quanta = 0;
  }

  process(inputs, outputs) {
    const input = inputs[0];
    const output = outputs[0];
    if (input.length > 0) {
      for (let channel = 0; channel < output.length; channel++) {
        output[channel].set(input[Math.min(channel, input.length - 1)]);
      }
      const samples = input[0];
      this.frames += samples.length;
      for (let i = 0; i < samples.length; i++) {
        const level = Math.abs(samples[i]);
        if (level > this.peak) this.peak = level;
      }
    }
    if (++this.quanta % 8 === 0) {
      this.port.postMessage({ frames: this.frames, peak: this.peak });
      this.peak = 0;
    }
    return true;
  }
}

registerProcessor("polyvox-playback-tap", PlaybackTap);
