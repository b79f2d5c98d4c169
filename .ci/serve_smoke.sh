#!/usr/bin/env bash
# The README's first command, proven from scratch: a fresh virtual environment built exactly as
# `make serve` builds it (no test extras), `make serve` started, /ready 200, one /v1/audio/speech answer
# decoded with PyAV (serve_smoke.py, run by that environment's python), the server stopped. The
# embedded voice needs no PyTorch: the environment holds none, and the serving process maps none.
# A pytest test cannot see this: the suite runs in the test environment, which has every extra.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/polyvox-serve-smoke.XXXXXX")
server=""

finish() {
    status=$?
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
        kill -TERM -- "-$server" 2>/dev/null || true  # make and the server it started
        wait "$server" 2>/dev/null || true
    fi
    if [ "$status" -ne 0 ]; then
        echo "serve smoke FAILED: \`make serve\` in a fresh environment did not serve speech" >&2
        [ -f "$work/serve.log" ] && { echo "--- its output:" >&2; tail -n 40 "$work/serve.log" >&2; }
    fi
    rm -rf "$work"
    exit "$status"
}
trap finish EXIT

# On a clean clone (CI) the environment is .venv itself, built by `make install` alone, which `make test`
# then extends with the test extras (one install, not two); where .venv exists already it may hold more
# than `make serve` installs, so a scratch one is built instead.
if [ -e .venv ]; then venv="$work/venv"; else venv=.venv; fi
echo "serve smoke: building a fresh environment as \`make serve\` does ($venv)"
make --no-print-directory install VENV="$venv"
if "$venv/bin/python" -m pip show torch >/dev/null 2>&1; then
    echo "serve smoke: \`make install\` installed torch, which the embedded voice does not need" >&2
    exit 1
fi
port=$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The server's state goes to the scratch directory, not the CI user's home.
export POLYVOX_PORT="$port" POLYVOX_VOICES_DIR="$work/voices" POLYVOX_CACHE_DIR="$work/cache"
setsid make --no-print-directory serve VENV="$venv" >"$work/serve.log" 2>&1 &
server=$!
"$venv/bin/python" .ci/serve_smoke.py "http://127.0.0.1:$port" "$server"
kill -TERM -- "-$server"
wait "$server" 2>/dev/null || true
server=""
echo "serve smoke: passed"
