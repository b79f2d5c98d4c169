"""The engine process: one data-parallel rank's model, engine core and step loop, apart from the API
server. Forked from multiprocessing's forkserver (engine/client.py; `run`), it loads the model from a
`ModelSpec` while it tells connected clients its start-up stage, answers `Ready`, then runs the engine's
one step loop (`core/step_loop.py` `run_steps`, the one the in-thread engine runs) with its socket as the
transport (`EngineCoreProc`): take the messages waiting (blocking only when idle), apply them (an abort
frees its KV blocks before the next step), step, and send each client its step's patches in one
message. Prompts are prepared alongside and admitted as they are ready (those read at this boundary
waited for a moment, so that they join this step rather than the next), but the pieces of one long input
in the order they came: a later piece never has audio while an earlier one has none, so a piece that
had none when its rank died (and is sent again elsewhere) was never overtaken by one that had.

Several clients may connect (API processes behind `api_server_count`, and the launcher that owns the
engine): each gets its own requests' patches, and the others the counters alone; `Forget` drops a client
that died, with its requests.

It exits on `Shutdown`, and by itself once its owner (the API server, or the launcher; `OwnerWatch`) is
gone and no client is connected any more: a launcher killed with -9 leaves its API processes draining,
and they keep their engines until they have gone. It ignores SIGTERM and SIGINT, which a service
manager may send to the whole process group: the API server drains first and then shuts its engines
down.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for

import msgspec
import numpy as np
import torch
import zmq
from zmq.utils.monitor import parse_monitor_message

from polyvox.core.core import StepFailed, StepOutput
from polyvox.core.errors import EngineInputError, EngineOverloaded
from polyvox.core.step_loop import run_steps
from polyvox.engine import messages as m
from polyvox.engine.model_spec import ModelSpec
from polyvox.engine.options import WorkerOptions
from polyvox.engine.owner import OwnerWatch
from polyvox.engine.request_spans import RequestSpans
from polyvox.engine.worker import EngineWorker
from polyvox.runtime.heap import freeze_heap
from polyvox.runtime.logs import LogFormat, setup_logging
from polyvox.runtime.startup import STAGES

log = logging.getLogger(__name__)

IDLE_POLL_MS = 100  # how often an idle engine checks that the API server is still there
PREPARE_THREADS = 2  # prompts built (tokenised, references encoded) alongside the step loop
# Requests read at a step boundary are read only there (the socket is not read during a step), so their
# prompts start then; waiting a little for them lets them join this step instead of the next. The wait
# ends as soon as they are ready and is bounded by a share of the step (what it costs every running
# request) and a cap (a reference clip being encoded takes longer; it joins later).
ADMIT_WAIT_SHARE = 0.1
ADMIT_WAIT_CAP_S = 0.025

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4

_NO_AUDIO = np.zeros((0, 0), dtype=np.float32)

Peer = bytes  # a client's socket identity
RequestKey = tuple[Peer, int]


def run(
    spec: ModelSpec,
    options: WorkerOptions,
    address: str,
    owner_pid: int,
    log_level: str = "warning",
    log_format: LogFormat = "text",
    restarts: int = 0,
) -> None:
    """The process's entry point (picklable arguments only); `owner_pid`: the process that started it;
    `restarts`: the rank's earlier deaths, for the handshake."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    setup_logging(log_level, log_format)
    keep_freed_memory()
    if options.torch_threads is not None:
        # on the thread that steps: a thread that already ran PyTorch keeps the count it had then (OpenMP's
        # is per thread), and this one imported PyTorch in the forkserver, with the default (every core)
        torch.set_num_threads(options.torch_threads)
    context = zmq.Context()
    socket = context.socket(zmq.ROUTER)
    socket.setsockopt(zmq.LINGER, 1000)
    # No high-water mark: past one, a ROUTER drops messages, and a lost chunk would hang its request.
    # Every request's output is bounded by its max_len, as the in-thread engine's queues are.
    socket.setsockopt(zmq.SNDHWM, 0)
    socket.setsockopt(zmq.RCVHWM, 0)
    link = ClientLink(socket, OwnerWatch(owner_pid))  # before the bind, so it sees every client connect
    socket.bind(address)
    worker = link.start_up(spec, options, restarts)
    if worker is not None:
        freeze_heap()  # the loaded model's objects leave the collector's full passes (fewer long pauses)
        EngineCoreProc(worker, link).run()
    link.close()
    socket.close()
    context.term()
    sys.exit(0 if worker is not None else 1)


def keep_freed_memory() -> bool:
    """Have glibc's malloc keep the memory this process frees instead of handing it back to the kernel:
    a step's large buffers are freed at its end and allocated again by the next, and each time they
    came back from the kernel one page fault at a time (14,000-18,000 a step on the CPU, BENCHMARKS.md
    #23). Large blocks come from the heap rather than from mmap of their own, and the heap is not
    trimmed; the process's resident size stays at its high-water mark. False where there is no glibc,
    or where MALLOC_MMAP_MAX_ or MALLOC_TRIM_THRESHOLD_ in the environment chose already."""
    if "MALLOC_MMAP_MAX_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (macOS, musl without it)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_MAX, 0) and mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))


class ClientLink:
    """The engine's socket: who is connected, what they are told, and whether anyone is left to serve."""

    def __init__(self, socket: zmq.Socket, owner: OwnerWatch) -> None:
        self.socket = socket
        self.owner = owner
        self.peers: set[Peer] = set()
        self.poller = zmq.Poller()
        self.poller.register(socket, zmq.POLLIN)
        self.greeting: m.Ready | m.StartFailed | m.Stage = m.Stage(None)
        self.shutdown = False
        # connections open to the socket (accepted less closed), from the socket's own events
        self.connections = 0
        self.events = socket.get_monitor_socket(zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED)
        self.poller.register(self.events, zmq.POLLIN)

    def orphaned(self) -> bool:
        """Its owner is gone, and every client has closed its connection too."""
        return self.connections <= 0 and self.owner.gone()

    def close(self) -> None:
        self.owner.close()
        self.socket.disable_monitor()
        self.events.close(linger=0)

    def send(self, peer: Peer, message: object) -> None:
        self.socket.send_multipart([peer, m.encode(message)], copy=False)

    def broadcast(self, message: object) -> None:
        for peer in self.peers:
            self.send(peer, message)

    def receive(self, timeout_ms: int) -> list[tuple[Peer, object]]:
        """Every message waiting, after waiting up to `timeout_ms` for the first; hellos and shutdown
        are handled here."""
        received: list[tuple[Peer, object]] = []
        if not self.poller.poll(timeout_ms):
            return received
        self._count_connections()
        while True:
            try:
                peer, payload = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return received
            message = m.to_engine.decode(payload)
            if isinstance(message, m.Hello):
                self.peers.add(peer)
                self.send(peer, self.greeting)
            elif isinstance(message, m.Shutdown):
                self.shutdown = True
            elif isinstance(message, m.Forget):
                self.peers.discard(message.peer)
                received.append((peer, message))
            else:
                received.append((peer, message))

    def _count_connections(self) -> None:
        while True:
            try:
                event = parse_monitor_message(self.events.recv_multipart(zmq.NOBLOCK))["event"]
            except zmq.Again:
                return
            self.connections += 1 if event == zmq.EVENT_ACCEPTED else -1

    def start_up(self, spec: ModelSpec, options: WorkerOptions, restarts: int = 0) -> EngineWorker | None:
        """Load the model and build the worker in a thread while clients hear the stage it is in."""
        built: Future[EngineWorker] = Future()

        def build() -> None:
            try:
                model = spec.source().load()
                built.set_result(options.worker(options.prompt_builder(model)))
            except BaseException as exc:
                built.set_exception(exc)

        threading.Thread(target=build, name="polyvox-engine-load", daemon=True).start()
        shown: str | None = None
        while not built.done():
            self.receive(IDLE_POLL_MS)
            if self.shutdown or self.orphaned():
                return None
            if (current := STAGES.current) != shown:
                shown = current
                self.greeting = m.Stage(current)
                self.broadcast(self.greeting)
        try:
            worker = built.result()
        except Exception as exc:
            log.error("the engine failed to start: %s: %s", type(exc).__name__, exc)
            self.greeting = m.StartFailed(f"{type(exc).__name__}: {exc}")
            self.broadcast(self.greeting)
            time.sleep(0.5)  # let the message leave before the process does
            return None
        blocks = worker.core.block_manager.num_blocks
        device = str(worker.prompts.model.device)
        threads = torch.get_num_threads()  # on the thread that steps
        self.greeting = m.Ready(os.getpid(), device, blocks, worker.config.kv_block_size, restarts, threads)
        self.broadcast(self.greeting)
        return worker


class EngineCoreProc:
    """The step loop's transport in an engine process: requests and aborts in from the socket, prompts
    prepared alongside, patches out to each client."""

    def __init__(self, worker: EngineWorker, link: ClientLink) -> None:
        self.worker = worker
        self.core = worker.core
        self.link = link
        self.prepare_pool = ThreadPoolExecutor(PREPARE_THREADS, thread_name_prefix="polyvox-prompt")
        # prepared prompts wake the loop through this pipe (the socket poller watches it)
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        link.poller.register(self._wake_read, zmq.POLLIN)
        self.preparing: dict[RequestKey, Future] = {}  # in the order the requests came
        self.request_of: dict[RequestKey, str] = {}  # the request (of a long input's pieces) being prepared
        self.seq_of: dict[RequestKey, int] = {}
        self.key_of: dict[int, RequestKey] = {}
        self.stats_sent = False  # whether clients have the counters as they are now
        self.spans = RequestSpans()  # the traced requests' (otel_traces on the API side)
        self.fresh: list[Future] = []  # prompts submitted at this step boundary
        self.step_s = 0.0  # a running mean of the time between boundaries (a step and its outputs)
        self.boundary = time.monotonic()

    def run(self) -> None:
        run_steps(self.core, self)

    # the transport `run_steps` drives

    @property
    def stopped(self) -> bool:
        if self.link.orphaned():
            log.warning("its owner and every client are gone: the engine exits")
            return True
        return self.link.shutdown

    def take(self, wait: bool) -> None:
        if not wait:  # it stepped since the last boundary
            step_s = time.monotonic() - self.boundary
            self.step_s = 0.8 * self.step_s + 0.2 * step_s if self.step_s else step_s
        for peer, message in self.link.receive(IDLE_POLL_MS if wait else 0):
            self.apply(peer, message)
        if self.fresh and not wait:  # idle, it is woken when they are ready
            wait_for(self.fresh, timeout=min(ADMIT_WAIT_CAP_S, ADMIT_WAIT_SHARE * self.step_s))
        self.fresh.clear()
        self.admit_prepared()
        self.boundary = time.monotonic()

    def idle(self) -> None:
        if not self.stats_sent:  # clients learn the counters once the engine has gone idle
            self.link.broadcast(self.stats())
            self.stats_sent = True

    def fail(self, failure: StepFailed) -> None:
        for seq_id in failure.seq_ids:
            if (key := self.key_of.pop(seq_id, None)) is not None:
                del self.seq_of[key]
                self.spans.ended(key, "failed")
                self.link.send(key[0], m.Failed(key[1], "failed", str(failure)))
        self.stats_sent = False

    def apply(self, peer: Peer, message: object) -> None:
        if isinstance(message, m.Generate):
            self.link.peers.add(peer)  # told its patches, even if it was forgotten (a pid used again)
            key = (peer, message.key)
            self.spans.received(key, message.trace)
            future = self.prepare_pool.submit(self.worker.prepare, message.request)
            self.preparing[key] = future
            self.fresh.append(future)
            self.request_of[key] = message.request.request_id
            future.add_done_callback(lambda _: os.write(self._wake_write, b"."))
        elif isinstance(message, m.Abort):
            self.abort((peer, message.key))
        elif isinstance(message, m.ControlCall):
            self.control(peer, message)
        elif isinstance(message, m.Forget):
            gone = message.peer
            for key in [k for k in (*self.preparing, *self.seq_of) if k[0] == gone]:
                self.abort(key)
            if self.seq_of or self.preparing:
                log.info("a client is gone: its requests are dropped")

    def abort(self, key: RequestKey) -> None:
        self.spans.ended(key, "aborted")
        if key in self.preparing:
            self.preparing.pop(key).cancel()
            del self.request_of[key]
        if (seq_id := self.seq_of.pop(key, None)) is not None:
            del self.key_of[seq_id]
            self.core.abort(seq_id)
            self.stats_sent = False

    def stats(self) -> m.Stats:
        return m.Stats(self.core.stats(), self.worker.prompts.prompt_cache.stats(), self.held())

    def held(self) -> int:
        return len(self.preparing) + len(self.seq_of)

    def admit_prepared(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._wake_read, 4096)
        unready: set[tuple[Peer, str]] = set()  # requests with a piece still being prepared
        for key, future in list(self.preparing.items()):
            request = (key[0], self.request_of[key])
            if not future.done() or request in unready:
                if request[1]:
                    unready.add(request)  # its later pieces wait for this one
                continue
            del self.preparing[key]
            del self.request_of[key]
            try:
                prompt, params = future.result()
                seq = self.core.add_request(prompt, params, str(key[1]))
            except EngineInputError as exc:
                self.spans.ended(key, "failed")
                self.link.send(key[0], m.Failed(key[1], "input", exc.message, exc.param, exc.code))
                continue
            except EngineOverloaded as exc:
                self.spans.ended(key, "failed")
                self.link.send(key[0], m.Failed(key[1], "overloaded", str(exc)))
                continue
            except Exception as exc:
                log.exception("preparing a request failed")
                self.spans.ended(key, "failed")
                self.link.send(key[0], m.Failed(key[1], "failed", f"{type(exc).__name__}: {exc}"))
                continue
            self.seq_of[key] = seq.seq_id
            self.key_of[seq.seq_id] = key
            self.spans.admitted(key)
            self.stats_sent = False

    def publish(self, outputs: list[StepOutput]) -> None:
        by_peer: dict[Peer, list[m.Chunk]] = {}
        for out in outputs:
            key = self.key_of.get(out.seq_id)
            if key is None:
                continue
            if out.finished:
                del self.key_of[out.seq_id]
                del self.seq_of[key]
                self.spans.ended(key, "finished")
            by_peer.setdefault(key[0], []).append(m.Chunk(key[1], out.index, out.finished, out.row))
        # The step's audio goes out as one frame, not copied (the runner makes a new array each step),
        # when one client has every row; several clients each get their own rows.
        audio = np.ascontiguousarray(outputs[0].step_audio, dtype=np.float32) if outputs else _NO_AUDIO
        samples = audio.shape[1] if audio.ndim == 2 else 0
        stats, prompts, held = self.core.stats(), self.worker.prompts.prompt_cache.stats(), self.held()
        for peer in self.link.peers:
            chunks = by_peer.get(peer)
            if chunks is None and len(self.link.peers) > 1:
                self.link.send(peer, m.Stats(stats, prompts, held))  # nothing of its own this step
                continue
            chunks, frame = chunks or [], audio
            if len(by_peer) > 1:
                frame = audio[[chunk.row for chunk in chunks]]
                chunks = [msgspec.structs.replace(c, row=i) for i, c in enumerate(chunks)]
            message = m.Outputs(chunks, stats, prompts, samples, held)
            self.link.socket.send_multipart([peer, m.encode(message), frame.data], copy=False)
        self.stats_sent = True

    def control(self, peer: Peer, call: m.ControlCall) -> None:
        """A control call runs between steps; its result (or error) goes back to the caller."""
        try:
            result = self.worker.control(call.method, call.args)
        except Exception as exc:
            self.link.send(peer, m.ControlReply(call.call_id, error=f"{type(exc).__name__}: {exc}"))
            return
        self.link.send(peer, m.ControlReply(call.call_id, result=result))
