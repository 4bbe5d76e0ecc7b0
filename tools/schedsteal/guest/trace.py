"""tracefs: start and stop a recording, write markers, count lost events.

The probes' events are enabled at boot (vm.py's trace_event=): turning a
tracepoint on or off later patches code, which QEMU's TCG can get wrong.
So only tracing_on and the stack-trace triggers change here.

abbench's runner records in an ``Instance`` of its own instead
(tracing/instances/schedsteal-PID): its own ring buffer, capped per CPU,
and its own event switches; the top-level buffer, which other tools may
be using, is never touched. Enabling an event there adds a probe to the
tracepoint; only a tracepoint's first and second probes patch code, so
vm.py's guests boot with a second instance already holding the sched
events (trace_instance=), and the runner's is a third.
"""
from __future__ import annotations

import os
import re

from . import kernel

TRACING = "/sys/kernel/tracing"
# The sched events schedtrace reads: vm.py enables them at boot and
# abbench run --trace-dir checks that they are on.
SCHED_EVENTS = ("sched_switch", "sched_migrate_task", "sched_wakeup",
                "sched_wakeup_new")


class TraceError(Exception):
    pass


# The runner's ring buffer per CPU, by default (abbench run --trace-buffer-kb).
INSTANCE_BUFFER_KB = 4096
# The part of a trace file that holds its header ("#" lines).
HEAD_BYTES = 65536
COPY_CHUNK = 1 << 20
# Instance directories are made and removed by mkdir/rmdir; tests replace
# these with ones that fake the files tracefs puts in a new instance.
_mkdir = os.mkdir
_rmdir = os.rmdir


class Instance:
    """A tracefs instance of our own that records `events` ("sched" events,
    by bare name) into a buffer of `buffer_kb` per CPU: ``create()``, then
    ``start()`` and ``stop()`` around each recording and ``copy_to(path)``, and
    ``remove()`` (safe to call whatever state create() got to)."""

    def __init__(self, name: str, buffer_kb: int, events=SCHED_EVENTS,
                 tracing: str = TRACING):
        self.path = f"{tracing}/instances/{name}"
        self.buffer_kb = buffer_kb
        self.events = tuple(events)
        self.created = False

    def _write(self, name: str, text: str) -> None:
        kernel.write(f"{self.path}/{name}", text)

    def create(self) -> int:
        """Make the instance, size its buffer, enable its events, tracing
        off; the KiB its buffers take in all (buffer_total_size_kb)."""
        try:
            _mkdir(self.path)
        except OSError as exc:
            raise TraceError(f"cannot create tracefs instance {self.path}: "
                             f"{exc.strerror or exc} (tracefs mounted? root?)") from None
        self.created = True
        self._write("tracing_on", "0")
        self._write("buffer_size_kb", str(self.buffer_kb))
        for event in self.events:
            self._write(f"events/sched/{event}/enable", "1")
        try:
            return int(kernel.read(f"{self.path}/buffer_total_size_kb").split()[0])
        except (kernel.KernelError, ValueError, IndexError):
            return self.buffer_kb * (os.cpu_count() or 1)

    def start(self) -> None:
        """Clear the buffer and record."""
        self._write("tracing_on", "0")
        self._write("trace", "")
        self._write("tracing_on", "1")

    def stop(self) -> None:
        self._write("tracing_on", "0")

    def copy_to(self, path: str) -> int:
        """Copy the trace into the file path, a chunk at a time (never the
        whole trace in memory); the events the buffer lost."""
        head = b""
        src = f"{self.path}/trace"
        try:
            with open(src, "rb") as f, open(path, "wb") as out:
                while chunk := f.read(COPY_CHUNK):
                    out.write(chunk)
                    if len(head) < HEAD_BYTES:
                        head += chunk[:HEAD_BYTES - len(head)]
        except OSError as exc:
            raise TraceError(f"cannot copy {src} to {path}: "
                             f"{exc.strerror or exc}") from None
        return trace_lost(head.decode(errors="replace"))

    def remove(self) -> None:
        """Stop, disable the events (so the tracepoints lose this probe)
        and rmdir the instance; TraceError if it stays."""
        if not self.created:
            return
        for name, value in (("tracing_on", "0"),
                            *((f"events/sched/{e}/enable", "0") for e in self.events)):
            try:
                self._write(name, value)
            except kernel.KernelError:
                pass  # rmdir says whether it is gone
        try:
            _rmdir(self.path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise TraceError(f"cannot remove tracefs instance {self.path}: "
                             f"{exc.strerror or exc}") from None
        self.created = False


def _trigger(event: str, value: str) -> None:
    kernel.write(f"{TRACING}/events/{event}/trigger", value)


def start(events, buffer_kb: int, stacktrace=()) -> None:
    """Clear the buffer and record `events` ("sched/sched_switch" ...),
    with a kernel stack after each event of `stacktrace`."""
    kernel.write(f"{TRACING}/tracing_on", "0")
    kernel.write(f"{TRACING}/buffer_size_kb", str(buffer_kb))
    kernel.write(f"{TRACING}/trace", "")
    for event in stacktrace:
        _trigger(event, "stacktrace")
    for event in events:
        kernel.write(f"{TRACING}/events/{event}/enable", "1")
    kernel.write(f"{TRACING}/tracing_on", "1")


def stop(stacktrace=()) -> tuple[str, int]:
    """(the trace text, events the ring buffer dropped)."""
    kernel.write(f"{TRACING}/tracing_on", "0")
    for event in stacktrace:
        _trigger(event, "!stacktrace")
    text = kernel.read(f"{TRACING}/trace")
    return text, trace_lost(text)


def marker(text: str) -> None:
    kernel.write(f"{TRACING}/trace_marker", text)


# Only a comment line is the header: an event's text may quote anything.
LOST_RE = re.compile(r"^#\s*entries-in-buffer/entries-written: (\d+)/(\d+)", re.M)


def trace_lost(text: str) -> int:
    """Events the ring buffer dropped, from the trace file's header.

    Without the header nothing says whether events were lost, and a
    silent 0 would pass every "trace_lost == 0" check: TraceError."""
    m = LOST_RE.search(text)
    if not m:
        raise TraceError("trace has no entries-in-buffer/entries-written "
                         "header: cannot tell how many events were lost")
    return int(m[2]) - int(m[1])
