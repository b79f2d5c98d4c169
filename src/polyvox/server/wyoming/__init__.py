"""The Wyoming protocol (Home Assistant's local speech services) on `wyoming_port`: a TTS server in the
API process, on the same speech service as `/v1/audio/speech` (docs/home-assistant.md)."""
