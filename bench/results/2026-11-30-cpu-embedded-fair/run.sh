#!/bin/bash
# The fair-queue before/after of BENCHMARKS.md: four servers side by side, each variant measured in
# turn at every point, two rounds. Each variant is a copy of src/ (run with PYTHONPATH), identical
# but for the embedded engine's files:
#   before  (/tmp/h11/before2/src): embedded.py and piecewise.py of 4626181, no fair_queue.py
#   after   (/tmp/h11/final/src):   e6bc5e6, the default pool (2 cores: 2 workers x 1 ONNX thread)
#   after-embedded_workers1:        e6bc5e6 with POLYVOX_EMBEDDED_WORKERS=1 (1 worker x 2 ONNX threads)
#   strict  (/tmp/h11/strict2/src): embedded.py and fair_queue.py of 5d1cb64 (first sentences always
#                                   first), 2 workers
# Usage: run.sh OUTDIR [ROUNDS], from the repository root.
set -u
OUT=$1; ROUNDS=${2:-2}; mkdir -p "$OUT"
cd /work/main
start() { env PYTHONPATH=$3 $4 .venv/bin/polyvox serve --port $2 --no-cache-enabled > "$OUT/serve-$1.log" 2>&1 & echo $! > "$OUT/pid-$1"; }
start before 18341 /tmp/h11/before2/src "X=1"
start after 18342 /tmp/h11/final/src "X=1"
start after-embedded_workers1 18343 /tmp/h11/final/src "POLYVOX_EMBEDDED_WORKERS=1"
start strict 18344 /tmp/h11/strict2/src "POLYVOX_EMBEDDED_WORKERS=2"
sleep 20
LONG="The quick brown fox jumps over the lazy dog. Then it runs across the field, past the old barn, and into the forest. The birds are singing in the tall green trees. A small stream winds between the rocks. The fox stops to drink, then looks around. Nobody is there, so it curls up and falls asleep in the sun."
for r in $(seq 1 $ROUNDS); do
for input in default long; do
  for c in 1 4 16; do
    case $c in 1) n=6;; 4) n=12;; 16) n=32;; esac
    for v in before after after-embedded_workers1 strict; do
      case $v in before) port=18341;; after) port=18342;; after-embedded_workers1) port=18343;; strict) port=18344;; esac
      extra=(); [ "$input" = long ] && extra=(--input "$LONG")
      echo "r$r $input c=$c n=$n $v $(uptime)" >> "$OUT/uptime.txt"
      .venv/bin/polyvox bench --url http://127.0.0.1:$port --stream --concurrency $c --requests $n "${extra[@]}" --json > "$OUT/r$r-$input-c$c-$v.json"
    done
  done
done
done
echo "end $(uptime)" >> "$OUT/uptime.txt"
for v in before after after-embedded_workers1 strict; do kill $(cat "$OUT/pid-$v"); done
