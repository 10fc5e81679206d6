"""Chapter 07: bounded stress of streams, events, copies and both allocators.

Every test runs a fixed number of iterations and stops early at a deadline,
so that it stays well under a minute on a slow or sanitized build; nothing
asserts on time. The seeds are fixed and every failure message names its
seed, thread and step, so a failure reproduces (in the multi-threaded mix,
which items threads hand each other depends on timing too, so a rare
failure may need a few runs).

Ordering is made observable on purpose: ``_delay`` holds a stream for a few
milliseconds (a testing gate that opens itself), so work enqueued behind it
really is still pending when the host moves on. A missing wait, an event
that fires early, or a block handed out again while a stream still uses it
then shows up as wrong values (often the NaN a destination was filled with),
not as a lucky pass.
"""

import dataclasses
import gc
import os
import queue
import random
import threading
import time
import traceback

import pytest
import torch
import torch.nn.functional as F
import torch_accinte  # noqa: F401
from torch_accinte import _C

# NB: fixed, so that a failure reproduces; ACCINTE_STRESS_SEED explores others.
SEED = int(os.environ.get("ACCINTE_STRESS_SEED", "1307"))
DEVICES = (0, 1)
MiB = 1 << 20
# Each test stops issuing new work after this many seconds, whatever its
# iteration count says (then finishes and checks what it started).
DEADLINE_SECONDS = 10.0
# A thread still running this long after the deadline is hung.
HANG_SECONDS = 40.0
NAN = float("nan")


def _thread_count() -> int:
    """Threads of this process, as the kernel counts them."""
    return len(os.listdir("/proc/self/task"))


def _rss_bytes() -> int:
    """Resident memory of this process (VmRSS)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def _rss_growth_limit(base: int) -> int:
    """``base``, plus AddressSanitizer's quarantine when its runtime is
    loaded: freed memory waits there (256 MiB unless ASAN_OPTIONS says
    otherwise) before it can be reused, and counts as resident."""
    with open("/proc/self/maps") as maps:
        text = maps.read()
        if "libasan" not in text and "clang_rt.asan" not in text:
            return base
    quarantine_mb = 256
    for option in os.environ.get("ASAN_OPTIONS", "").replace(",", ":").split(":"):
        if option.startswith("quarantine_size_mb="):
            quarantine_mb = int(option.split("=", 1)[1])
    return base + quarantine_mb * MiB


def _delay(device: int, rng: random.Random, gates: list) -> None:
    """Holds the current stream of ``device`` for 1 to 5 ms.

    The gate opens by itself when its timeout expires (or when it is
    dropped, whichever comes first), so nothing can hang on it.
    """
    gates.append(_C._testing.StreamGate(device, rng.uniform(0.001, 0.005)))
    del gates[:-8]


def _close(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    # NB: equal_nan, because values propagate through products and sums and
    # the CPU computes the same inf and NaN; a destination filled with NaN
    # that a copy never reached still fails on the finite values expected.
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-3,
                               equal_nan=True, msg=lambda m: f"{what}: {m}")


def _run_in_threads(work, count: int, seed: int) -> None:
    """Runs ``work(index)`` in ``count`` threads; re-raises the first failure
    with its seed and traceback, and fails on a thread that hangs."""
    failures = []

    def run(index: int) -> None:
        try:
            work(index)
        except BaseException as exc:  # noqa: BLE001 (re-raised below)
            failures.append((index, exc, traceback.format_exc()))

    # NB: daemon threads, so that a hung one fails the test instead of
    # keeping the interpreter from exiting.
    threads = [threading.Thread(target=run, args=(index,), daemon=True,
                                name=f"stress-{index}") for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_SECONDS + HANG_SECONDS)
    hung = [thread.name for thread in threads if thread.is_alive()]
    assert not hung, f"seed {seed}: threads {hung} did not finish (hang)"
    if failures:
        index, exc, text = failures[0]
        raise AssertionError(
            f"seed {seed}: {len(failures)} of {count} threads failed; thread "
            f"{index}:\n{text}") from exc


# ---------------------------------------------------------------------------
# Several host threads x both devices x several streams, a random mix.
# ---------------------------------------------------------------------------

# Element counts: a few bytes, the small pool (up to 1 MiB), the large pool.
SIZES = (1, 7, 100, 1000, 4096, 4096, 70_000, 300_000)
MIX_THREADS = 4
MIX_STEPS = 600
MIX_STREAMS_PER_DEVICE = 3
MAX_LIVE = 10


@dataclasses.dataclass(eq=False)
class _Item:
    """A device tensor, the CPU value it must hold, and its ordering.

    ``ready`` is recorded after the last write; ``reads`` are recorded after
    each read since then, on the readers' streams. A reader waits for
    ``ready``, a writer for ``ready`` and every read. ``expected`` is never
    modified in place.
    """

    tensor: torch.Tensor
    expected: torch.Tensor
    ready: torch.Event
    origin: str
    home: torch.Stream  # the stream it was allocated on
    reads: list = dataclasses.field(default_factory=list)

    @property
    def device(self) -> int:
        return self.tensor.device.index


# LITERALINCLUDE START: STRESS_ORDERING
def _begin_read(item: _Item, stream: torch.Stream) -> None:
    # Red if wait_event did not order the stream after the producer (or
    # after another thread's producer, for items handed over): the reader
    # sees the memory before the write, behind a delayed producer.
    stream.wait_event(item.ready)
    # NB: a no-op on the stream the tensor was allocated on; on any other, the
    # caching allocator must hold the block until this stream's work is done
    # once the tensor is freed. Red if it does not: the block goes back to
    # its allocation stream and a new tensor's writes land before this read.
    item.tensor.record_stream(stream)


def _end_read(item: _Item, stream: torch.Stream) -> None:
    item.reads.append(stream.record_event())


def _begin_write(item: _Item, stream: torch.Stream) -> None:
    _begin_read(item, stream)
    # Red if a write could overtake an earlier read on another stream (a
    # pending copy out of the tensor would copy the new values).
    for event in item.reads:
        stream.wait_event(event)


def _end_write(item: _Item, stream: torch.Stream) -> None:
    item.ready = stream.record_event()
    item.reads = []
# LITERALINCLUDE END: STRESS_ORDERING


class _MixWorker:
    """One host thread of the random mix, with its own RNG and streams."""

    def __init__(self, index: int, handoff: queue.Queue, deadline: float):
        self.index = index
        self.seed = SEED + index
        self.rng = random.Random(self.seed)
        self.generator = torch.Generator().manual_seed(self.seed)
        self.handoff = handoff
        self.deadline = deadline
        self.streams = {
            device: [torch.accinte.Stream(device, priority=-(k % 2))
                     for k in range(MIX_STREAMS_PER_DEVICE)]
            for device in DEVICES}
        self.live: list[_Item] = []
        # Copies to the host that have been enqueued but not yet checked:
        # (event after the copy, destination, expected value, description).
        self.pending: list = []
        self.gates: list = []
        self.step = 0
        self.checked = 0

    def where(self, what: str) -> str:
        return f"seed {self.seed}, thread {self.index}, step {self.step}: {what}"

    def stream(self, device: int) -> torch.Stream:
        return self.rng.choice(self.streams[device])

    def maybe_delay(self, stream: torch.Stream, probability: float = 0.3) -> None:
        if self.rng.random() < probability:
            with torch.accinte.stream(stream):
                _delay(stream.device_index, self.rng, self.gates)

    def add(self, tensor, expected, stream, origin) -> None:
        self.live.append(_Item(tensor, expected, stream.record_event(),
                               self.where(origin), stream))

    def pick(self) -> _Item:
        return self.rng.choice(self.live)

    # -- operations ---------------------------------------------------------

    def upload(self, stream: torch.Stream | None = None, size: int = 0) -> None:
        stream = stream or self.stream(self.rng.choice(DEVICES))
        device = stream.device_index
        size = size or self.rng.choice(SIZES)
        values = torch.randn(size, generator=self.generator)
        pinned = self.rng.random() < 0.5
        non_blocking = self.rng.random() < 0.5
        self.maybe_delay(stream)
        source = values.pin_memory() if pinned else values.clone()
        with torch.accinte.stream(stream):
            tensor = source.to(f"accinte:{device}", non_blocking=non_blocking)
        self.add(tensor, values, stream,
                 f"upload pinned={pinned} non_blocking={non_blocking}")
        if pinned:
            # Red if the host allocator hands the pinned block out again
            # before the copy that reads it ran (recordPinnedMemoryUse
            # ignored): the scribble lands first and the copy moves NaN.
            del source
            scribble = torch.empty(size, pin_memory=True)
            scribble.fill_(NAN)
        else:
            # Red if a copy from pageable memory returned before reading it:
            # the caller may reuse pageable memory as soon as copy_ returns.
            source.fill_(NAN)

    def unary(self) -> None:
        item = self.pick()
        stream = self.stream(item.device)
        self.maybe_delay(stream)
        alpha = self.rng.choice((0.5, -2.0))
        op = self.rng.choice(("neg", "abs", "scaled_add", "clone", "exp"))
        with torch.accinte.stream(stream):
            _begin_read(item, stream)
            if op == "neg":
                out, expected = torch.neg(item.tensor), torch.neg(item.expected)
            elif op == "abs":
                out, expected = torch.abs(item.tensor), torch.abs(item.expected)
            elif op == "scaled_add":
                out = torch.ops.accinte.scaled_add(item.tensor, item.tensor, alpha)
                expected = torch.add(item.expected, item.expected, alpha=alpha)
            elif op == "clone":  # a device-to-device copy on one device
                out, expected = item.tensor.clone(), item.expected
            else:  # the CPU fallback, which waits for this stream only
                out = torch.exp(item.tensor.clamp(max=10.0))
                expected = torch.exp(item.expected.clamp(max=10.0))
            _end_read(item, stream)
        self.add(out, expected, stream, op)

    def binary(self) -> None:
        first = self.pick()
        partners = [item for item in self.live if item.device == first.device
                    and item.tensor.numel() == first.tensor.numel()]
        second = self.rng.choice(partners)
        stream = self.stream(first.device)
        self.maybe_delay(stream)
        op = self.rng.choice(("add", "mul", "maximum", "mm", "sum", "amax"))
        if op == "mm" and first.tensor.numel() != 4096:
            op = "add"
        with torch.accinte.stream(stream):
            _begin_read(first, stream)
            _begin_read(second, stream)
            a, b = first.tensor, second.tensor
            x, y = first.expected, second.expected
            if op == "add":
                out, expected = torch.add(a, b, alpha=0.5), torch.add(x, y, alpha=0.5)
            elif op == "mul":
                out, expected = torch.mul(a, b), torch.mul(x, y)
            elif op == "maximum":
                out, expected = torch.maximum(a, b), torch.maximum(x, y)
            elif op == "mm":
                out = torch.mm(a.view(64, 64), b.view(64, 64)).view(-1) / 64
                expected = torch.mm(x.view(64, 64), y.view(64, 64)).view(-1) / 64
            elif op == "sum":
                out, expected = (a + b).sum().view(1), (x + y).sum().view(1)
            else:
                out, expected = torch.amax(a - b).view(1), torch.amax(x - y).view(1)
            _end_read(first, stream)
            _end_read(second, stream)
        self.add(out, expected, stream, op)

    def in_place(self, item: _Item | None = None) -> None:
        item = item or self.pick()
        stream = self.stream(item.device)
        self.maybe_delay(stream)
        with torch.accinte.stream(stream):
            _begin_write(item, stream)
            if self.rng.random() < 0.5:
                item.tensor.neg_()
                expected = torch.neg(item.expected)
            else:
                item.tensor.mul_(0.75)
                expected = torch.mul(item.expected, 0.75)
            _end_write(item, stream)
        item.expected = expected

    def recycle(self) -> None:
        # Copy a tensor out, then overwrite it: the copy is held back on its
        # stream, and the write, maybe on another stream, must wait for it
        # (_begin_write). Red if it does not: the copy moves the new values.
        item = self.pick()
        self.download(item, delay=1.0)
        self.in_place(item)

    def across_devices(self) -> None:
        item = self.pick()
        source_device = item.device
        target_device = 1 - source_device
        target = self.stream(target_device)
        self.maybe_delay(target, probability=1.0)
        # Dense bytes are copied by the device; a strided view or another
        # dtype goes through the host, read on the source device's current
        # stream.
        layout = self.rng.choice(("dense", "dense", "strided", "float64"))
        with torch.accinte.stream(target):
            # Ordering the destination's current stream after the producer
            # is enough, for every layout: red if a copy reads first.
            target.wait_event(item.ready)
            if layout == "dense":
                out, expected = item.tensor.to(f"accinte:{target_device}"), item.expected
            elif layout == "strided":
                out = item.tensor[::2].to(f"accinte:{target_device}")
                expected = item.expected[::2].clone()
            else:
                out = item.tensor.to(f"accinte:{target_device}", torch.float64).float()
                expected = item.expected
        # NB: the copy also makes the source device's current stream (here
        # its default stream) wait for it. That stream, not the target's,
        # is on the tensor's device, so it is the one to record: red if a
        # freed source block could be reused before the copy read it.
        item.tensor.record_stream(torch.accinte.current_stream(source_device))
        _end_read(item, target)
        self.add(out, expected, target, f"{layout} copy {source_device}->{target_device}")
        if self.rng.random() < 0.5:
            # The source goes at once, while the copy is held back, and a
            # tensor of its size is made on its allocation stream: the
            # likeliest taker of its block. (Its value lives on in the copy,
            # which is checked.)
            self.live.remove(item)
            self.upload(item.home, item.tensor.numel())

    def strided(self) -> None:
        # Copies that a kernel does element by element: a strided view, a
        # dtype conversion, a broadcast from the host.
        item = self.pick()
        stream = self.stream(item.device)
        self.maybe_delay(stream)
        kind = self.rng.choice(("view", "dtype", "broadcast"))
        with torch.accinte.stream(stream):
            _begin_read(item, stream)
            if kind == "view":
                out, expected = item.tensor[::3].clone(), item.expected[::3].clone()
            elif kind == "dtype":
                out = item.tensor.to(torch.float64).mul(2.0).to(torch.float32)
                expected = item.expected.to(torch.float64).mul(2.0).to(torch.float32)
            else:
                value = self.rng.uniform(-1.0, 1.0)
                out = torch.empty_like(item.tensor)
                out.copy_(torch.tensor(value), non_blocking=True)
                out = torch.maximum(out, item.tensor)
                expected = torch.maximum(torch.full_like(item.expected, value), item.expected)
            _end_read(item, stream)
        self.add(out, expected, stream, f"strided {kind}")

    def download(self, item: _Item | None = None, delay: float = 0.3) -> None:
        """Copies ``item`` to the host; checks it now, or later for a
        non-blocking copy into pinned memory."""
        item = item or self.pick()
        stream = self.stream(item.device)
        self.maybe_delay(stream, delay)
        kind = self.rng.choice(("pinned", "pinned", "to", "pageable"))
        with torch.accinte.stream(stream):
            _begin_read(item, stream)
            if kind == "pinned":
                host = torch.empty(item.tensor.shape, pin_memory=True)
                host.fill_(NAN)
                host.copy_(item.tensor, non_blocking=True)
            elif kind == "to":
                host = item.tensor.to("cpu", non_blocking=True)
            else:
                # Pageable: copy_ returns once the bytes are on the host.
                # Red if the stream had not waited for the producer.
                host = item.tensor.cpu()
                _close(host, item.expected, self.where(f"pageable download of {item.origin}"))
                self.checked += 1
                _end_read(item, stream)
                return
            _end_read(item, stream)
            done = stream.record_event()
        # NB: a non-blocking copy into pinned memory may land at any time
        # until `done` completes: reading it is valid only after
        # done.synchronize() (see settle). Red if the event completed before
        # the copy, or the copy ran before the producer.
        self.pending.append((done, host, item.expected,
                             self.where(f"{kind} download of {item.origin}")))

    def free(self) -> None:
        item = self.live.pop(self.rng.randrange(len(self.live)))
        # Check every result before it goes: the copy out reads it after the
        # tensor is freed, which only the allocator's stream bookkeeping
        # allows.
        self.download(item)
        del item

    def hand_over(self) -> None:
        # An item made (and perhaps still being made) by this thread's
        # streams goes to whichever thread takes it next; its events go with
        # it, recorded by this thread and waited for by the other.
        item = self.live.pop(self.rng.randrange(len(self.live)))
        self.handoff.put(item)

    def take_over(self) -> None:
        try:
            item = self.handoff.get_nowait()
        except queue.Empty:
            return
        self.live.append(item)

    def scratch(self) -> None:
        # Allocation churn that nothing reads: a busy allocator around the
        # checked work.
        device = self.rng.choice(DEVICES)
        with torch.accinte.stream(self.stream(device)):
            tensors = [torch.empty(self.rng.choice(SIZES), device=f"accinte:{device}")
                       for _ in range(self.rng.randint(1, 4))]
        del tensors

    def settle(self, wait_all: bool) -> None:
        """Checks the pending host copies whose events completed (all of them
        if ``wait_all``)."""
        still = []
        for done, host, expected, what in self.pending:
            if wait_all or done.query():
                done.synchronize()
                _close(host, expected, what)
                self.checked += 1
            else:
                still.append((done, host, expected, what))
        self.pending = still

    # -- driver -------------------------------------------------------------

    def run(self) -> None:
        operations = [(self.upload, 3), (self.unary, 4), (self.binary, 3),
                      (self.in_place, 1), (self.recycle, 2),
                      (self.across_devices, 2), (self.strided, 1),
                      (self.download, 2), (self.free, 2), (self.hand_over, 1),
                      (self.take_over, 1), (self.scratch, 1)]
        functions = [function for function, _ in operations]
        weights = [weight for _, weight in operations]
        for self.step in range(MIX_STEPS):
            if time.monotonic() > self.deadline:
                break
            if len(self.live) < 2:
                operation = self.upload
            elif len(self.live) > MAX_LIVE:
                operation = self.free
            else:
                operation = self.rng.choices(functions, weights)[0]
            operation()
            if self.rng.random() < 0.2:
                self.settle(wait_all=False)
        while self.live:
            self.free()
        self.settle(wait_all=True)
        self.gates.clear()


def test_threads_devices_streams_random_mix_against_cpu():
    for device in DEVICES:
        torch.accinte.synchronize(device)
    gc.collect()
    allocated = [torch.accinte.memory_allocated(d) for d in DEVICES]
    handoff: queue.Queue = queue.Queue()
    deadline = time.monotonic() + DEADLINE_SECONDS
    workers = [_MixWorker(index, handoff, deadline) for index in range(MIX_THREADS)]
    _run_in_threads(lambda index: workers[index].run(), MIX_THREADS, SEED)
    # Items handed over after their taker had finished: check them here.
    leftovers = _MixWorker(MIX_THREADS, handoff, deadline)
    while True:
        leftovers.take_over()
        if not leftovers.live:
            break
        leftovers.free()
    leftovers.settle(wait_all=True)
    checked = sum(worker.checked for worker in workers) + leftovers.checked
    steps = [worker.step for worker in workers]
    assert checked > 4 * MIX_THREADS, f"seed {SEED}: only {checked} checks ({steps})"
    del workers, leftovers, handoff
    gc.collect()
    for device in DEVICES:
        torch.accinte.synchronize(device)
    # Every tensor of the mix is gone, so is its memory.
    assert [torch.accinte.memory_allocated(d) for d in DEVICES] == allocated, (
        f"seed {SEED}")


# ---------------------------------------------------------------------------
# Allocator churn: mixed sizes, split and merged blocks, several streams.
# ---------------------------------------------------------------------------

CHURN_STEPS = 1000
# Element counts by block class: the small pool (up to 1 MiB), the large
# pool's shared 20 MiB segments (up to 10 MiB), and segments of their own.
CHURN_CLASSES = ((1, 128), (129, 262_144), (262_145, 2_500_000),
                 (2_700_000, 4_000_000))
CHURN_STAT_KEYS = (
    "allocated_bytes.all.current", "requested_bytes.all.current",
    "active_bytes.all.current", "allocation.all.current",
    "active.all.current", "reserved_bytes.all.current",
    "segment.all.current", "inactive_split.all.current",
    "inactive_split_bytes.all.current",
)


def _span(tensor: torch.Tensor) -> tuple[int, int]:
    start = tensor.data_ptr()
    return start, start + tensor.numel() * tensor.element_size()


def _check_churned(live: list, reads: list) -> None:
    # NB: a function of its own, so that no loop variable outlives it and
    # keeps a tensor allocated past the final statistics.
    for tensor, value, home in live:
        with torch.accinte.stream(home):
            actual = tensor.cpu()
        assert bool((actual == value).all()), f"seed {SEED + 100}: a live tensor changed"
    for read in reads:
        _check_read(*read)


def _check_read(result, value, reader, where) -> None:
    with torch.accinte.stream(reader):
        actual = result.cpu()
    assert bool((actual == value).all()), (
        f"{where}: a read on another stream saw other values (a reused "
        "block, or a read before the fill)")


def _assert_disjoint(tensor: torch.Tensor, live: list, where: str) -> None:
    # Red on a split or merge that loses track of a block's extent: two live
    # tensors of one device never share a byte.
    start, end = _span(tensor)
    for other, _, _ in live:
        if other.device == tensor.device:
            other_start, other_end = _span(other)
            assert end <= other_start or other_end <= start, (
                f"{where}: [{start:#x}, {end:#x}) overlaps a live tensor at "
                f"[{other_start:#x}, {other_end:#x})")


def test_allocator_churn_of_mixed_sizes_on_several_streams():
    rng = random.Random(SEED + 100)
    gates: list = []
    for device in DEVICES:
        torch.accinte.synchronize(device)
    gc.collect()
    torch.accinte.empty_cache()
    before = {d: torch.accinte.memory_stats(d) for d in DEVICES}
    streams = {d: [torch.accinte.Stream(d) for _ in range(3)] for d in DEVICES}
    # (tensor, value it was filled with, stream it was filled on)
    live: list = []
    # (result of a read on another stream, its expected value, the stream)
    reads: list = []
    seen_splits = seen_own_segments = 0
    deadline = time.monotonic() + DEADLINE_SECONDS
    for step in range(CHURN_STEPS):
        if time.monotonic() > deadline:
            break
        where = f"seed {SEED + 100}, step {step}"
        device = rng.choice(DEVICES)
        stream = rng.choice(streams[device])
        choice = rng.random()
        if choice < 0.5 or len(live) < 4:
            low, high = rng.choice(CHURN_CLASSES)
            count = rng.randint(low, high)
            value = float(step + 1)
            with torch.accinte.stream(stream):
                if rng.random() < 0.3:
                    _delay(device, rng, gates)
                tensor = torch.empty(count, device=f"accinte:{device}")
                # A kernel broadcasts the host scalar, behind the delay.
                tensor.copy_(torch.tensor(value), non_blocking=True)
            _assert_disjoint(tensor, live, where)
            live.append((tensor, value, stream))
            del tensor
        elif choice < 0.7:
            # Read on another stream, then free at once: record_stream must
            # keep the block from the allocation stream's next tensor (whose
            # fill would otherwise land before this delayed read).
            newest = rng.random() < 0.5
            tensor, value, home = live.pop(-1 if newest else rng.randrange(len(live)))
            reader = rng.choice([s for s in streams[tensor.device.index] if s != home])
            # Red without the wait: an undelayed read overtakes the fill.
            reader.wait_stream(home)
            with torch.accinte.stream(reader):
                if rng.random() < 0.5:
                    _delay(reader.device_index, rng, gates)
                reads.append((torch.neg(tensor), -value, reader, where))
            tensor.record_stream(reader)
            del tensor
            if len(reads) > 8:
                _check_read(*reads.pop(0))
        elif choice < 0.95:
            del live[rng.randrange(len(live))]
        else:
            tensor, value, home = rng.choice(live)
            with torch.accinte.stream(home):
                actual = tensor[:: max(1, tensor.numel() // 1000)].cpu()
            assert bool((actual == value).all()), f"{where}: a live tensor changed"
            del tensor, actual
        stats = torch.accinte.memory_stats(device)
        seen_splits = max(seen_splits, stats["inactive_split.all.current"])
        seen_own_segments = max(
            seen_own_segments, stats["reserved_bytes.large_pool.current"])
    for device in DEVICES:
        torch.accinte.synchronize(device)
    gates.clear()
    _check_churned(live, reads)
    # The test reached what it is about: split segments and the large pool.
    assert seen_splits > 0 and seen_own_segments > 20 * MiB, f"seed {SEED + 100}"
    del live, reads
    gc.collect()
    for device in DEVICES:
        torch.accinte.synchronize(device)
    torch.accinte.empty_cache()
    for device in DEVICES:
        after = torch.accinte.memory_stats(device)
        # Red if a block was lost or counted twice, a merged neighbour kept,
        # or a block freed while pending never came back to its pool (then
        # its segment could not be released).
        changed = {key: (before[device][key], after[key]) for key in CHURN_STAT_KEYS
                   if before[device][key] != after[key]}
        assert not changed, f"seed {SEED + 100}, device {device}: {changed}"
        free, total = torch.accinte.mem_get_info(device)
        assert free + after["reserved_bytes.all.current"] == total


# ---------------------------------------------------------------------------
# Steady state: the same work again and again holds its memory and threads.
# ---------------------------------------------------------------------------

WARMUP_ITERATIONS = 20
STEADY_ITERATIONS = 300
# NB: generous, for the noise of glibc's arenas (one per worker thread) and
# Python's allocator; the leaks it is for grow by megabytes per iteration.
RSS_GROWTH_LIMIT = 64 * MiB
# The emulator's stream workers and the CPU kernels' thread pools are
# created on first use and kept; the warm-up has used all of them.
THREAD_SLACK = 2


def _allocate_free_round(device: int, stream, side, expected, where: str) -> None:
    """Device memory of three size classes and pinned memory, copies each
    way and a read on a second stream, then all freed."""
    with torch.accinte.stream(stream):
        small = torch.empty(1000, device=f"accinte:{device}")
        large = torch.empty(300_000, device=f"accinte:{device}")
        huge = torch.empty(3_000_000, device=f"accinte:{device}")
        host = expected.pin_memory()
        large.copy_(host, non_blocking=True)
        small.copy_(large[:1000])
        huge[:300_000].copy_(large)
        ready = torch.accinte.Event()
        ready.record(stream)
    side.wait_event(ready)
    with torch.accinte.stream(side):
        result = torch.neg(huge[:300_000])
        large.record_stream(side)
        huge.record_stream(side)
        out = torch.empty(300_000, pin_memory=True)
        out.copy_(result, non_blocking=True)
    # NB: freed before `done` is recorded, so that the events the allocator
    # records on `side` for large and huge come before it: once `done`
    # completed, the next round finds their blocks back in the pool.
    del small, large, huge, host, result
    done = side.record_event()
    done.synchronize()
    torch.testing.assert_close(out, -expected, msg=lambda m: f"{where}: {m}")


def _allocate_free_iteration(iteration: int) -> None:
    """Two identical rounds on each device, then the cache emptied."""
    expected = torch.arange(300_000, dtype=torch.float32) + iteration
    for device in DEVICES:
        # NB: new stream objects every time: they come from a fixed pool of
        # emulator streams (one worker thread each); red if each made one.
        stream = torch.accinte.Stream(device, priority=-(iteration % 2))
        side = torch.accinte.Stream(device)
        where = f"iteration {iteration}, device {device}"
        _allocate_free_round(device, stream, side, expected, where)
        segments = torch.accinte.memory_stats(device)["num_device_alloc"]
        _allocate_free_round(device, stream, side, expected, where)
        # Red if the second round could not reuse the first round's blocks:
        # those freed while `side` used them must come back to their pool
        # once its events completed.
        assert torch.accinte.memory_stats(device)["num_device_alloc"] == segments, where
    # Segments go back to the emulator and are reserved again next time: red
    # (on RSS) if the emulator's free does not release the memory behind
    # them.
    torch.accinte.empty_cache()


def test_allocate_free_loop_keeps_memory_and_threads_bounded():
    for device in DEVICES:
        torch.accinte.synchronize(device)
    gc.collect()
    torch.accinte.empty_cache()
    allocated = [torch.accinte.memory_allocated(d) for d in DEVICES]
    reserved = [torch.accinte.memory_reserved(d) for d in DEVICES]
    for iteration in range(WARMUP_ITERATIONS):
        _allocate_free_iteration(iteration)
    threads = _thread_count()
    rss = _rss_bytes()
    deadline = time.monotonic() + DEADLINE_SECONDS
    done = 0
    for iteration in range(WARMUP_ITERATIONS, WARMUP_ITERATIONS + STEADY_ITERATIONS):
        if time.monotonic() > deadline:
            break
        _allocate_free_iteration(iteration)
        done += 1
        where = f"iteration {iteration} (warm-up {WARMUP_ITERATIONS})"
        # Red on a block that is never freed (a leaked DataPtr, a block held
        # back by record_stream for ever).
        assert [torch.accinte.memory_allocated(d) for d in DEVICES] == allocated, where
        # Red on a block that never returns to its pool (an event never
        # processed, a split never merged): its segment stays reserved.
        assert [torch.accinte.memory_reserved(d) for d in DEVICES] == reserved, where
        # Red on a thread per stream, event or copy.
        assert _thread_count() <= threads + THREAD_SLACK, (where, threads, _thread_count())
    assert done >= 20, f"only {done} iterations before the deadline"
    growth = _rss_bytes() - rss
    # Red on pinned blocks that are never reused (2 x 1.2 MiB a round),
    # device memory the emulator does not give back (16 MiB an iteration),
    # or host staging that kernels keep alive.
    assert growth < _rss_growth_limit(RSS_GROWTH_LIMIT), (
        f"RSS grew by {growth / MiB:.1f} MiB over {done} iterations")


# ---------------------------------------------------------------------------
# Steady state of a small training loop, checked against the CPU.
# ---------------------------------------------------------------------------

TRAIN_WARMUP = 5
TRAIN_STEPS = 300
FEATURES, HIDDEN, OUTPUTS, BATCH = 32, 64, 8, 128


def _mlp(generator: torch.Generator) -> torch.nn.Sequential:
    # NB: skip_init and a private generator: the global RNG stays untouched.
    model = torch.nn.Sequential(
        torch.nn.utils.skip_init(torch.nn.Linear, FEATURES, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.utils.skip_init(torch.nn.Linear, HIDDEN, OUTPUTS),
    )
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.1)
    return model


def test_training_loop_against_cpu_keeps_memory_and_threads_bounded():
    device = torch.device("accinte:1")
    generator = torch.Generator().manual_seed(SEED + 200)
    reference = _mlp(generator)
    model = _mlp(torch.Generator().manual_seed(SEED + 200)).to(device)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
                  for m in (reference, model)]
    batches = [(torch.randn(BATCH, FEATURES, generator=generator),
                torch.randn(BATCH, OUTPUTS, generator=generator)) for _ in range(7)]
    copy_stream = torch.accinte.Stream(1)
    compute = torch.accinte.current_stream(1)
    rng = random.Random(SEED + 200)
    gates: list = []

    def prefetch(step: int):
        # Pinned each step (the host allocator's cache serves it), copied on
        # a side stream while the previous step computes.
        inputs, targets = batches[step % len(batches)]
        with torch.accinte.stream(copy_stream):
            # A slow transfer: the compute stream gets there first unless it
            # waits for the copy.
            _delay(1, rng, gates)
            x = inputs.pin_memory().to(device, non_blocking=True)
            y = targets.pin_memory().to(device, non_blocking=True)
        return x, y, copy_stream.record_event()

    def train_step(step: int, upcoming):
        x, y, ready = upcoming
        # Red without the wait: the compute stream reads a batch the copy
        # stream has not written yet, and the losses part from the CPU's.
        compute.wait_event(ready)
        # NB: needed in general (the batch was allocated on copy_stream);
        # here the CPU fallback has synchronized the compute stream by the
        # time a batch is freed, so the mix test is the one that catches a
        # missing record_stream.
        x.record_stream(compute)
        y.record_stream(compute)
        upcoming = prefetch(step + 1)
        loss = F.mse_loss(model(x), y)
        optimizers[1].zero_grad(set_to_none=True)
        loss.backward()
        optimizers[1].step()
        inputs, targets = batches[step % len(batches)]
        expected = F.mse_loss(reference(inputs), targets)
        optimizers[0].zero_grad(set_to_none=True)
        expected.backward()
        optimizers[0].step()
        torch.testing.assert_close(loss.detach().cpu(), expected.detach(), rtol=1e-4,
                                   atol=1e-5, msg=lambda m: f"step {step}: {m}")
        return upcoming

    upcoming = prefetch(0)
    for step in range(TRAIN_WARMUP):
        upcoming = train_step(step, upcoming)
    torch.accinte.synchronize(1)
    gc.collect()
    allocated = torch.accinte.memory_allocated(1)
    threads = _thread_count()
    rss = _rss_bytes()
    deadline = time.monotonic() + DEADLINE_SECONDS
    step = TRAIN_WARMUP
    while step < TRAIN_WARMUP + TRAIN_STEPS and time.monotonic() < deadline:
        upcoming = train_step(step, upcoming)
        step += 1
        # Parameters, momentum buffers and the next batch: the same bytes
        # after every step. Red on a leaked activation, gradient or batch.
        assert torch.accinte.memory_allocated(1) == allocated, f"step {step}"
        assert _thread_count() <= threads + THREAD_SLACK, (step, threads, _thread_count())
    assert step - TRAIN_WARMUP >= 20, f"only {step - TRAIN_WARMUP} steps"
    growth = _rss_bytes() - rss
    assert growth < _rss_growth_limit(RSS_GROWTH_LIMIT), (
        f"RSS grew by {growth / MiB:.1f} MiB over {step - TRAIN_WARMUP} steps")
    for trained, expected in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(trained.detach().cpu(), expected.detach(),
                                   rtol=1e-4, atol=1e-5)
    del upcoming
    torch.accinte.synchronize(1)
    gates.clear()
