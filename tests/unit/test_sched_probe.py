"""guest/sched_probe.py (schedsteal.guest.steal_probe): trace parsing and
steal classification; the trace helpers it uses (schedsteal.guest.trace)."""
import pytest

from schedsteal import cpulist
from schedsteal.guest import kernel, trace
from schedsteal.guest import steal_probe as probe

TRACE = """\
# tracer: nop
#
# entries-in-buffer/entries-written: 6/6   #P:4
#
       hackbench-97      [000] d..2.     7.039270: sched_migrate_task: comm=hackbench pid=101 prio=120 orig_cpu=2 dest_cpu=0
       hackbench-97      [000] d..2.     7.039277: <stack trace>
 => trace_event_raw_event_sched_migrate_task
 => set_task_cpu
 => sched_balance_newidle
 => pick_next_task_fair
 => __schedule
          <idle>-0       [001] dNs3.     7.053875: sched_migrate_task: comm=rcu_preempt pid=15 prio=120 orig_cpu=1 dest_cpu=2
          <idle>-0       [001] dNs3.     7.053934: <stack trace>
 => set_task_cpu
 => try_to_wake_up
       hackbench-98      [003] d..2.     7.060000: sched_migrate_task: comm=hackbench pid=102 prio=120 orig_cpu=1 dest_cpu=3
       hackbench-98      [003] d..2.     7.060001: <stack trace>
 => set_task_cpu
 => detach_tasks
 => sched_balance_rq
 => sched_balance_newidle
"""


def test_parse_trace_classifies_steals():
    ev = probe.parse_trace(TRACE)
    assert [(e["pid"], e["orig"], e["dest"], e["steal"]) for e in ev] == [
        (101, 2, 0, True), (15, 1, 2, False), (102, 1, 3, False)]
    assert ev[0]["comm"] == "hackbench"
    assert ev[2]["stack"][:2] == ["set_task_cpu", "detach_tasks"]
    assert ev[0]["stack"][:2] == ["trace_event_raw_event_sched_migrate_task", "set_task_cpu"]


def test_parse_trace_without_stacks_finds_no_steal():
    text = "\n".join(ln for ln in TRACE.splitlines() if "=>" not in ln)
    ev = probe.parse_trace(text)
    assert len(ev) == 3 and not any(e["steal"] for e in ev)


# CPU 1's event lands between CPU 0's event and CPU 0's stack: each stack
# must go to the event of its own CPU (this once made an ordinary wakeup
# migration look like a cross-LLC steal).
INTERLEAVED = """\
       hackbench-97      [000] d..2.     7.039270: sched_migrate_task: comm=hackbench pid=101 prio=120 orig_cpu=2 dest_cpu=0
          <idle>-0       [004] dNs3.     7.039271: sched_migrate_task: comm=hackbench pid=15 prio=120 orig_cpu=0 dest_cpu=4
       hackbench-97      [000] d..2.     7.039277: <stack trace>
 => set_task_cpu
 => steal_from
 => steal_task
          <idle>-0       [004] dNs3.     7.039280: <stack trace>
 => set_task_cpu
 => try_to_wake_up
"""


def test_parse_trace_matches_stacks_by_cpu():
    ev = probe.parse_trace(INTERLEAVED)
    assert [(e["pid"], e["cpu"], e["caller"], e["steal"]) for e in ev] == [
        (101, 0, "steal_from", True), (15, 4, "try_to_wake_up", False)]


def test_parse_trace_stack_without_its_event_is_dropped():
    text = INTERLEAVED.splitlines()
    ev = probe.parse_trace("\n".join(text[1:]))
    assert [(e["pid"], e["caller"]) for e in ev] == [(15, "try_to_wake_up")]


def test_parse_cpulist():
    assert cpulist.parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert cpulist.parse_cpulist("") == []



def test_trace_lost_reads_the_header():
    assert trace.trace_lost(TRACE) == 0
    lost = TRACE.replace("6/6   #P:4", "4096/4102   #P:4")
    assert trace.trace_lost(lost) == 6


NO_HEADER = "\n".join(ln for ln in TRACE.splitlines() if "entries-in-buffer" not in ln)


@pytest.mark.parametrize("text", [NO_HEADER, "", "# tracer: nop\n#\n"])
def test_trace_lost_without_the_header_is_an_error(text):
    # Without its header the trace cannot say whether events were lost:
    # that must not read as "none lost".
    with pytest.raises(trace.TraceError, match="entries-in-buffer"):
        trace.trace_lost(text)


def test_trace_lost_ignores_the_header_text_inside_an_event():
    text = ("# tracer: nop\n"
            "  sh-1 [000] d..2. 1.0: tracing_mark_write: "
            "entries-in-buffer/entries-written: 1/1\n")
    with pytest.raises(trace.TraceError):
        trace.trace_lost(text)


def test_trace_stop_fails_without_the_header(monkeypatch):
    monkeypatch.setattr(kernel, "write", lambda path, value: None)
    monkeypatch.setattr(kernel, "read", lambda path: NO_HEADER)
    with pytest.raises(trace.TraceError):
        trace.stop(stacktrace=[probe.MIGRATE])


SCHED_DEBUG_DELAYED = """\
cpu#1
  .nr_running                    : 3
  .cfs_overloaded                : 0

cfs_rq[1]:/autogroup-3
  .h_nr_runnable                 : 0

cfs_rq[1]:/
  .h_nr_runnable                 : 1
  .h_nr_queued                   : 3
  .h_nr_delayed                  : 2

cfs_rq[2]:/
  .h_nr_runnable                 : 4
"""


def test_root_cfs_rq_field_reads_the_root_cfs_rq_of_that_cpu(monkeypatch):
    monkeypatch.setattr(kernel, "read", lambda path: SCHED_DEBUG_DELAYED)
    assert kernel.root_cfs_rq_field(1, "h_nr_runnable") == 1
    assert kernel.root_cfs_rq_field(1, "h_nr_delayed") == 2
    assert kernel.root_cfs_rq_field(2, "h_nr_runnable") == 4
    assert kernel.root_cfs_rq_field(3, "h_nr_runnable") is None


class FakeHog:
    def __init__(self, pid):
        self.pid = pid


def fake_tasks(monkeypatch, sched_debug, states, ticks, cpu=1):
    monkeypatch.setattr(kernel, "read", lambda path: sched_debug)
    monkeypatch.setattr(kernel, "task_state", lambda pid: states[pid])
    monkeypatch.setattr(kernel, "task_cpu", lambda pid: cpu)
    monkeypatch.setattr(kernel, "task_ticks", lambda pid: ticks[pid])


def test_queued_hogs_that_sleep_are_not_yet_runnable(monkeypatch):
    """nr_running is 3, but two hogs sleep under delayed dequeue: the
    probe must not switch features yet (the flaky case of issue 28)."""
    hogs = [FakeHog(p) for p in (10, 11, 12)]
    fake_tasks(monkeypatch, SCHED_DEBUG_DELAYED, {10: "R", 11: "S", 12: "S"},
               {10: 9, 11: 9, 12: 9})
    assert kernel.rq_field(1, "nr_running") == 3
    assert not probe.hogs_runnable(1, hogs)


def test_hogs_count_as_runnable_once_all_run_their_loop(monkeypatch):
    debug = SCHED_DEBUG_DELAYED.replace(": 1\n  .h_nr_queued", ": 3\n  .h_nr_queued")
    hogs = [FakeHog(p) for p in (10, 11, 12)]
    fake_tasks(monkeypatch, debug, {10: "R", 11: "R", 12: "R"}, {10: 5, 11: 4, 12: 3})
    assert probe.hogs_runnable(1, hogs)
    # One that has not run its loop long enough yet, or sits elsewhere.
    fake_tasks(monkeypatch, debug, {10: "R", 11: "R", 12: "R"}, {10: 5, 11: 4, 12: 0})
    assert not probe.hogs_runnable(1, hogs)
    fake_tasks(monkeypatch, debug, {10: "R", 11: "R", 12: "R"}, {10: 5, 11: 4, 12: 3}, cpu=2)
    assert not probe.hogs_runnable(1, hogs)


def test_task_ticks_adds_user_and_system_time(monkeypatch):
    stat = "42 (sh) R 1 42 42 0 -1 4194304 100 0 0 0 7 5 0 0 20 0 1 0 100 0 0"
    monkeypatch.setattr(kernel, "read", lambda path: stat)
    assert kernel.task_ticks(42) == 12


def debug_block(cpu, curr, sis_idle):
    return f"cpu#{cpu}\n  .nr_running                    : 0\n  .curr->pid                     : {curr}\n" \
           f"  .sis_idle                      : {sis_idle}\n\n"


def test_rq_fields_reads_several_fields_of_one_cpu(monkeypatch):
    text = debug_block(2, 0, 0) + debug_block(3, 812, 1)
    monkeypatch.setattr(kernel, "read", lambda path: text)
    assert kernel.rq_fields(3, ("curr->pid", "sis_idle")) == {"curr->pid": 812, "sis_idle": 1}
    assert kernel.rq_field(2, "sis_idle") == 0
    with pytest.raises(kernel.KernelError, match="no .nothing for cpu#3"):
        kernel.rq_fields(3, ("sis_idle", "nothing"))


def test_unparked_cpu_is_read_while_idle(monkeypatch):
    """A CPU just unparked that still runs something (a kworker, a stopper)
    is read again until its current task is the idle task (CI: one read in
    three found it busy and not yet in the set)."""
    from schedsteal.guest import placement_probe
    reads = iter([debug_block(3, 812, 0), debug_block(3, 40, 0), debug_block(3, 0, 1)])
    monkeypatch.setattr(kernel, "read", lambda path: next(reads))
    assert placement_probe.unparked_in_set(3) == (1, 2)
    # idle and not in the set: what the unpark's seeding exists to prevent
    monkeypatch.setattr(kernel, "read", lambda path: debug_block(3, 0, 0))
    assert placement_probe.unparked_in_set(3) == (0, 0)
    # never idle: no answer, and the test that reads it fails on None
    monkeypatch.setattr(kernel, "read", lambda path: debug_block(3, 812, 0))
    assert placement_probe.unparked_in_set(3) == (None, placement_probe.UNPARK_READS)
