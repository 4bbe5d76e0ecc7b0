"""tracefs: start and stop a recording, write markers, count lost events.

The probes' events are enabled at boot (vm.py's trace_event=): turning a
tracepoint on or off later patches code, which QEMU's TCG can get wrong.
So only tracing_on and the stack-trace triggers change here.
"""
from __future__ import annotations

import re

from . import kernel

TRACING = "/sys/kernel/tracing"
# The sched events schedtrace reads: vm.py enables them at boot and
# abbench run --trace-dir checks that they are on.
SCHED_EVENTS = ("sched_switch", "sched_migrate_task", "sched_wakeup",
                "sched_wakeup_new")


class TraceError(Exception):
    pass


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
