"""The voice and voice-consent routes, voice creation from a request and the form fields they read."""
