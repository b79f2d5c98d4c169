"""`/v1/audio/speech/ws`: the route, one session's state machine, its message schema and sentence buffer."""
