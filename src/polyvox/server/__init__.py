"""HTTP layer: the app, auth, errors, metrics and protocol models; routes grouped by concern in speech/,
websocket/, voice_routes/, admin/ and lifecycle/."""
