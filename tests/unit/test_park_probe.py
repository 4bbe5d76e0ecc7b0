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
