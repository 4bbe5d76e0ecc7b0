"""guest/park_probe.py (schedsteal.guest.park_probe): trace parsing and the
evacuation measure."""
from schedsteal.guest import park_probe as probe


def sw(cpu, ts, prev, nxt):
    return (f"  {prev}-1 [{cpu:03d}] d..2. {ts:.6f}: sched_switch: prev_comm={prev} "
            f"prev_pid=1 prev_prio=120 prev_state=S ==> next_comm={nxt} next_pid=2 "
            f"next_prio=120")


def tick(cpu, ts):
    return (f"  <idle>-0 [{cpu:03d}] d.h1. {ts:.6f}: hrtimer_expire_entry: "
            f"hrtimer=00000000deadbeef function=tick_nohz_handler now=1")


def mark(cpu, ts, text):
    return f"  python3-9 [{cpu:03d}] ..... {ts:.6f}: tracing_mark_write: {text}"


TRACE = "\n".join([
    "# tracer: nop",
    sw(2, 1.0, "swapper/2", "hackbench"),      # workload before parking
    sw(3, 1.1, "swapper/3", "stress-ng-cpu"),
    mark(0, 2.0, "PARK"),
    tick(2, 2.004), tick(3, 2.004),
    mark(0, 2.005, "PARKED"),
    sw(2, 2.006, "hackbench", "migration/2"),  # pushed after one tick
    tick(2, 2.008), tick(3, 2.008),
    tick(2, 2.012), tick(3, 2.012),
    mark(0, 3.0, "UNPARK"),
    sw(2, 3.1, "swapper/2", "hackbench"),
    sw(3, 3.2, "stress-ng-cpu", "swapper/3"),
])


def test_parse_events_kinds():
    ev = probe.parse_events(TRACE)
    kinds = [k for _, _, k, _ in ev]
    assert kinds.count("marker") == 3 and kinds.count("tick") == 6
    assert ev[0] == (1.0, 2, "switch", ("swapper/2", "hackbench"))


def test_evacuation_counts_ticks_until_the_workload_left():
    res = probe.evacuation(probe.parse_events(TRACE), [2, 3])
    assert res[2]["workload_before"] == 1
    assert res[2]["stay_ticks"] == 1 and res[2]["stay_s"] == 0.006
    assert res[2]["stay_ticks_after_write"] == 0
    assert res[2]["workload_after_unpark"] == 1
    assert res[2]["ticks_while_parked"] == 3


def test_a_task_still_there_at_unpark_counts_as_stranded():
    res = probe.evacuation(probe.parse_events(TRACE), [2, 3])
    # stress-ng-cpu ran on CPU 3 from before the write to after the unpark.
    assert res[3]["stay_s"] == 1.0 and res[3]["stay_ticks"] == 3
    assert res[3]["stay_ticks_after_write"] == 2


def test_a_cpu_without_workload_after_parking_stays_zero():
    trace = "\n".join([mark(0, 1.0, "PARK"), tick(4, 1.1), mark(0, 2.0, "UNPARK")])
    res = probe.evacuation(probe.parse_events(trace), [4])
    assert res[4]["stay_ticks"] == 0 and res[4]["stay_s"] == 0.0


SCHED_DEBUG = """\
cpu#3
  .nr_running                    : 0

cfs_rq[3]:/autogroup-12
  .util_avg                      : 900

cfs_rq[3]:/
  .load_avg                      : 1021
  .util_avg                      : 704
  .util_est                      : 0

cfs_rq[1]:/
  .util_avg                      : 12
"""


def test_root_util_reads_the_root_cfs_rq_of_that_cpu(monkeypatch):
    monkeypatch.setattr(probe.kernel, "read", lambda path: SCHED_DEBUG)
    assert probe.root_util(3) == 704
    assert probe.root_util(1) == 12


def test_root_util_of_a_cpu_not_listed_is_zero(monkeypatch):
    """A fully decayed cfs_rq leaves the list that sched/debug prints."""
    monkeypatch.setattr(probe.kernel, "read", lambda path: SCHED_DEBUG)
    assert probe.root_util(2) == 0


INTERRUPTS = """\
           CPU0       CPU1       CPU2       CPU3
  1:          9          0          0          0   IO-APIC   1-edge      i8042
LOC:       5000       4000       3000         17   Local timer interrupts
RES:         10         11         12          2   Rescheduling interrupts
CAL:        100        101        102          3   Function call interrupts
"""


def test_cpu_irqs_takes_that_cpus_column(monkeypatch):
    monkeypatch.setattr(probe.kernel, "read", lambda path: INTERRUPTS)
    assert probe.cpu_irqs(3) == {"LOC": 17, "RES": 2, "CAL": 3}
    assert probe.cpu_irqs(0) == {"LOC": 5000, "RES": 10, "CAL": 100}


PROC_SCHED = """\
python3 (123, #threads: 1)
-------------------------------------------------------------------
se.exec_start                                :         12345.678901
mm->numa_scan_seq                            :                    7
numa_preferred_nid                           :                    1
"""


def test_task_sched_reads_numbers_and_misses_as_none(monkeypatch):
    monkeypatch.setattr(probe.kernel, "read", lambda path: PROC_SCHED)
    assert probe.task_sched(123, "mm->numa_scan_seq") == 7
    assert probe.task_sched(123, "numa_preferred_nid") == 1
    assert probe.task_sched(123, "se.exec_start") == 12345
    assert probe.task_sched(123, "nr_migrations") is None


def test_dl_total_bw_reads_the_cpus_dl_rq_block(monkeypatch):
    text = ("cpu#0\n  .nr_running : 1\n\ndl_rq[0]:\n  .dl_nr_running : 0\n"
            "  .dl_bw->bw                     : 996147\n"
            "  .dl_bw->total_bw               : 1677696\n\n"
            "dl_rq[1]:\n  .dl_bw->total_bw               : 5\n")
    monkeypatch.setattr(probe.kernel, "read", lambda path: text)
    assert probe.dl_total_bw() == 1677696
    assert probe.dl_total_bw(1) == 5
    assert probe.dl_total_bw(2) is None


SOFTIRQS = """\
                    CPU0       CPU1       CPU2       CPU3
          HI:          0          0          0          0
       TIMER:        100        200        300         40
      NET_RX:          1          0          0          0
         RCU:         50         60         70          8
"""


def schedstat_text(rq_cpu_time):
    lines = ["version 15", "timestamp 1"]
    for cpu, t in enumerate(rq_cpu_time):
        lines.append(f"cpu{cpu} 0 0 {100 * cpu} 0 0 0 {t} 0 0")
    return "\n".join(lines) + "\n"


def test_proc_table_rows_and_columns():
    rows, cols = probe.proc_table(INTERRUPTS)
    assert cols == [0, 1, 2, 3]
    assert rows["LOC"] == [5000, 4000, 3000, 17] and rows["1"] == [9, 0, 0, 0]
    assert probe.irq_names(INTERRUPTS) == {"1": "IO-APIC 1-edge i8042"}
    srows, _ = probe.proc_table(SOFTIRQS)
    assert srows["RCU"] == [50, 60, 70, 8]


def test_proc_table_offline_cpu_has_no_column():
    """An offline CPU's column is left out of both files; rows of fewer
    numbers (ERR:, MIS:) count for no CPU."""
    text = "           CPU0       CPU2\nLOC:  5  7  Local timer\nERR:  3\n"
    rows, cols = probe.proc_table(text)
    assert cols == [0, 2] and rows == {"LOC": [5, 7]}


def test_quiet_counts_sums_only_the_cpus_asked():
    after_irq = INTERRUPTS.replace("5000       4000       3000         17",
                                   "5100       4000       3050         20").replace(
        "  1:          9          0          0          0",
        "  1:          9          0          4          1")
    after_soft = SOFTIRQS.replace("RCU:         50         60         70          8",
                                  "RCU:         50         60         75          9")
    before = {"interrupts": INTERRUPTS, "softirqs": SOFTIRQS,
              "schedstat": schedstat_text([0, 0, 1_000_000, 0])}
    after = {"interrupts": after_irq, "softirqs": after_soft,
             "schedstat": schedstat_text([9, 9, 3_500_000, 1_000_000])}
    out = probe.quiet_counts(before, after, [2, 3])
    assert out["interrupts"] == {"1": 5, "LOC": 53}
    assert out["device_irqs"] == 5 and out["total_irqs"] == 58
    assert out["irqs_per_cpu"] == {2: 54, 3: 4}
    assert out["softirqs"] == {"RCU": 6}
    assert out["task_ms"] == 3.5 and out["sched_count"] == 0


def test_stopper_runs_times_each_run_of_that_cpus_stopper():
    text = "\n".join([
        sw(7, 1.000, "python3", "migration/7"),
        sw(6, 1.001, "python3", "migration/6"),     # another CPU's stopper
        sw(7, 1.004, "migration/7", "python3"),
        sw(6, 1.009, "migration/6", "python3"),
        sw(7, 2.000, "python3", "migration/7"),
        sw(7, 2.010, "migration/7", "swapper/7"),
        sw(7, 3.000, "python3", "migration/7"),     # still running at the end
    ])
    runs = probe.stopper_runs(probe.parse_events(text), 7)
    assert [round(r, 6) for r in runs] == [0.004, 0.010]


def test_stopper_runs_ignore_a_run_whose_start_was_not_traced():
    text = sw(7, 1.0, "migration/7", "python3")
    assert probe.stopper_runs(probe.parse_events(text), 7) == []


def test_unpark_while_short_refuses_a_set_that_is_not_a_proper_subset(monkeypatch):
    import argparse
    import pytest
    writes = []
    monkeypatch.setattr(probe.kernel, "write", lambda path, text: writes.append(path))
    monkeypatch.setattr(probe.kernel, "set_parked", lambda cpus: writes.append(cpus))
    for bad in ("1-3", "0,2"):
        args = argparse.Namespace(park="1-3", unpark_to=bad, lower_rt_us=200000)
        with pytest.raises(ValueError, match="proper subset"):
            probe.unpark_while_short(args)
    assert writes == [], "nothing written before the check"
