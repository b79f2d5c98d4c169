#!/bin/sh
# The polyvox image's entrypoint. Configuration comes from POLYVOX_* environment variables only.
#   (no arguments) or --flags      polyvox serve [--flags]
#   serve|say|bench|checkpoint ... polyvox <that subcommand> ...
#   healthcheck                    exit 0 when GET /health on this container's port answers 200
#   anything else                  run it as a command (e.g. sh)
# The server is exec'd so it is PID 1 and receives the SIGTERM that starts its drain.
set -eu

warn_unwritable() {
    for dir in "$@"; do
        [ -n "$dir" ] || continue
        if ! mkdir -p "$dir" 2>/dev/null || [ ! -w "$dir" ]; then
            echo "polyvox-entrypoint: $dir is not writable by uid $(id -u); a volume mounted from the" \
                "host must belong to that uid (chown $(id -u) on the host): polyvox runs without a cache" \
                "there, and does not start without its voices directory" >&2
        fi
    done
}

if [ "$#" -eq 0 ]; then
    set -- serve
fi

case "$1" in
    healthcheck)
        exec python -c 'import os, sys, urllib.request
port = os.environ.get("POLYVOX_PORT", "8000")
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=4) as answer:
        sys.exit(0 if answer.status == 200 else 1)
except Exception as exc:
    print(f"polyvox-entrypoint: /health on port {port}: {exc}", file=sys.stderr)
    sys.exit(1)'
        ;;
    -*)
        set -- serve "$@"
        ;;
esac

case "$1" in
    serve)
        warn_unwritable "${POLYVOX_VOICES_DIR:-}" "${POLYVOX_CACHE_DIR:-}" "${HF_HOME:-}"
        exec polyvox "$@"
        ;;
    say | bench | checkpoint)
        exec polyvox "$@"
        ;;
    *)
        exec "$@"
        ;;
esac
