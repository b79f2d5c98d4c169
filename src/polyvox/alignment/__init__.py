"""Word timestamps: where each word the client sent is heard in the audio it receives (`words`), and the
aligners that find words inside a piece of generated audio (`aligner` setting)."""
