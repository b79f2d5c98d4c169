"""Start `polyvox serve` (embedded voice) from TREE, measure wall time to /ready and the process's CPU
(user+sys from /proc) at ready, then one speech request; print one JSON line."""
import json, os, socket, subprocess, sys, time
import httpx
tree = sys.argv[1]
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
env = {**os.environ, "PYTHONPATH": f"{tree}/src", "PYTHONDONTWRITEBYTECODE": ""}
t0 = time.monotonic()
p = subprocess.Popen([sys.executable, "-m", "polyvox.cli", "serve", "--port", str(port), "--no-cache-enabled",
                      "--voices-dir", f"/tmp/es-voices-{port}"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while True:
    try:
        if httpx.get(f"http://127.0.0.1:{port}/ready").status_code == 200: break
    except httpx.TransportError: pass
    time.sleep(0.02)
ready = time.monotonic() - t0
tick = os.sysconf("SC_CLK_TCK")
f = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
cpu = (int(f[11]) + int(f[12])) / tick
rss = int(open(f"/proc/{p.pid}/status").read().split("VmRSS:")[1].split()[0]) / 1024
t1 = time.monotonic()
r = httpx.post(f"http://127.0.0.1:{port}/v1/audio/speech", json={"model": "tts-1", "input": "Hello there, how are you today?", "voice": "alloy", "response_format": "wav"}, timeout=60)
first = time.monotonic() - t1
p.terminate(); p.wait()
print(json.dumps({"tree": tree, "ready_s": round(ready, 2), "cpu_at_ready_s": round(cpu, 2), "rss_mib": round(rss), "first_request_s": round(first, 2), "status": r.status_code}))
