"""CPU parking probe (guest side): ``python3 guest/park_probe.py``.

Runs inside a test guest and prints one JSON object on stdout, which the
host-side tests (tests/vm/test_park.py) assert on.

    park_probe.py evacuate --park 2-7 [--hog N] [--rt] [--loops L] [--feature F]
        Run a CPU hog (and RT threads with --rt) and hackbench; park the
        CPUs, run hackbench again, unpark, run it once more. sched_switch
        and tick events are traced throughout: for each parked CPU, report
        how many of its own ticks passed between the write and the last
        moment a workload task was on it, and whether work came back
        after unparking. The write happens once a workload task is seen
        running on a CPU to park.
    park_probe.py badinput
        Write malformed and invalid sets; report each write's errno and
        the set before and after. Then race writers against each other.
        Also: the read-only preferred view, and offlines that fail and
        roll back (the parked set must be as it was).
    park_probe.py pinned --cpu 6 --park 4-7 [--mover 7]
        A hog allowed on one CPU only, which then gets parked: report its
        progress, its affinity and the park_pinned count. Beside it a
        second hog starts on --mover (also to be parked) and is allowed
        everywhere right after the park: report where it ends and both
        hogs' nr_migrations_cpu_non_preferred (/proc/PID/sched).
    park_probe.py pinnedeach --cpus 4-7 [--rounds 1] [--gap 0]
        One hog pinned to each CPU of --cpus, then those CPUs parked, per
        round: every task must be counted and have its own log line (the
        reports come at about the same tick; the limit is 10 lines in
        5 s, so --gap past 5 s for more than two rounds of 4).
    park_probe.py pingpong --park 5 --cpus 0,5 [--hogs 4] [--seconds 5]
        Hogs allowed on an unparked and a parked CPU: once they have left
        the parked CPU, sample where they run and count the parked CPU's
        pushes and evacuations; nothing may put them back.
    park_probe.py rt
        llc2x4, CPU 7 parked, RT throttling off. An RT task allowed on
        CPUs 0-2 and 7 is preempted on CPU 0 by a higher one, while CPUs 1
        and 2 run lower RT tasks and only the parked CPU 7 runs none: it
        must be pushed to CPU 1 or 2 (the next cpupri level). Then an RT
        task pinned to CPU 6 has CPU 6 parked under it: it stays, and is
        counted and reported like a pinned CFS task; so is one allowed on
        5-6 with 5 offline. Last, an RT task allowed on 5-7, asleep on 6
        with 5 offline, 6-7 parked and a higher one on 6, is woken: it
        must run on 7; one already queued behind the higher one on 6 must
        move to 7 once 7 is free. Then, with 5-7 parked, the second of two
        such tasks queued on 6 must reach CPU 5 once 5 is free, though
        the first has nowhere to go. Last, a FIFO 10 task allowed on 0 and
        the parked 7, woken on 0 where a FIFO 10 hog allowed on 0-1 runs,
        must run (the hog moving to the idle CPU 1). And a FIFO 20 task
        allowed on 0-1, woken on 0 where a FIFO 10 hog allowed on 0 and
        the parked 7 runs, must run on the idle CPU 1.
    park_probe.py dl [--busy-cpu 3] [--sleeper-cpu 2]
        Two SCHED_DEADLINE tasks, each alone on its CPU: a busy loop on
        CPU 3 (throttled and replenished on its runqueue, never woken) and
        a sleeper on CPU 2 (woken every 3 ms), then both CPUs parked: the
        tasks must leave them and stay off.
    park_probe.py dlmixed
        llc2x4, deadline admission control off (sched_rt_runtime_us -1):
        a deadline task allowed on 5-7, asleep on 6, with 5 offline, 6-7
        parked and a deadline hog of earlier deadlines on 6, is woken: it
        must run on 7. Then one already queued behind such a hog on 6 must
        move to 7 once 7 is free. Admission control is put back after.
    park_probe.py election --park 2 --start 0 --widen 0,1,3 [--hogs 4] [--feature F]
        smt4: CPU hogs pinned to one CPU, then allowed on three, one CPU
        parked. The parked CPU's idle sibling must get a hog: the load
        balancer's election of the group's balancing CPU must not fall on
        the parked CPU, which then declines.
    park_probe.py cookie --park 1 [--hogs 4] [--seconds 3]
        smt4, core scheduling: CPU 1 parked, an uncookied hog pinned to it,
        cookied hogs allowed everywhere. When CPU 1's sibling runs a
        cookied hog, CPU 1 is forced idle with a task queued, and core
        scheduling's balance steals a task of the running cookie from
        another CPU: onto a parked CPU. Count the cookied hogs seen on
        CPU 1 and its evacuations.
    park_probe.py parkedonly --park 2-3 [--hogs 3] [--seconds 2]
        Hogs pinned to the parked CPU 2, then allowed on 2 and 3 (both
        parked: all they have). The idle CPU 3 must get some, until the
        counts differ by one at most; then nothing moves.
    park_probe.py blocked --park 3 [--seconds 2]
        smt4: a hog on CPU 3 builds up its utilization, hogs keep CPUs
        0-2 busy, the hog on CPU 3 is stopped (its load stays, blocked),
        first with CPU 3 unparked, then parked. With no unparked CPU idle,
        no CPU is kicked to run the NOHZ idle balance, which also decays
        idle CPUs' blocked load: the parked CPU's must decay anyway.
    park_probe.py numa --park 4-7 [--seconds 6]
        numa2 with NUMA balancing on and fast scans: a task fills 64 MiB
        while pinned to node 1, is allowed everywhere, and node 1 is
        parked. NUMA balancing wants it back near its memory; it must not
        put it on a parked CPU. Samples its CPU; counts node 1's
        evacuations and NUMA balancing's scans of its memory (to show it ran).
    park_probe.py notify --cpu 3 [--park 3] [--rounds 200]
        WF_CURRENT_CPU: a thread pinned to --cpu makes system calls that
        a seccomp filter turns into user notifications, with
        SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP set, so each one wakes the
        supervisor (this process's main thread, polling the listener) on
        the notifier's CPU if the supervisor may run there. Report the
        CPU the supervisor ran on after each wakeup, with --park parked
        (and without: the control, where it should follow the notifier).
    park_probe.py localpull --park 3 --pinned 3 --start 4-7 --widen 0-2,4-7 [--hogs 6]
        llc2x4: CPU 3 parked with a hog pinned to it (a task the design
        leaves there); hogs started on the other LLC's CPUs 4-7, more
        than it has, then allowed on 0-2 as well. The idle CPUs 0-2 must
        pull some: a parked CPU's pinned task must not make its own
        group refuse every pull into itself.
    park_probe.py dlbw --park 1-3 --tasks N [--runtime-us R --period-us P]
        smt4: N SCHED_DEADLINE sleepers admitted (R/P of a CPU each), then
        the CPUs parked: a park that leaves too little unparked capacity
        for the bandwidth admitted must be refused (EBUSY, as hot-unplug
        refuses it) and change nothing; one that leaves enough is taken.
        Then, with the CPUs parked, one more task of the same size is
        admitted only if the unparked CPUs can take it.
        --lower-rt-us U --unpark-to S: then sched_rt_runtime_us is lowered
        to U (checked against every active CPU, parked ones too), which
        leaves the unparked CPUs short of the bandwidth admitted; a write
        of S, a subset of the parked set, only unparks and must be taken;
        a write of the first set again, parking more of the short domain,
        must still be refused. sched_rt_runtime_us is put back after.
    park_probe.py quiet --cpus 2-7 [--seconds 10] [--hogs 2]
        How quiet CPUs are that should not be used: under the same load
        (hogs and file reads over the 9p root, which interrupt), count what
        lands on them (/proc/interrupts by row, /proc/softirqs, schedule()
        calls and task run time from /proc/schedstat) with them preferred,
        parked, parked with the interrupt agent's pass (irq_preferred), and
        offline.
    park_probe.py landing [--cpu 0 --park 1-3 --widen 1-7 --probe-cpu 7 --rounds 20]
                          [--fallback-cpu 5 --fallback-park 1-3 --fallback-allowed 1,5,6]
        Two core paths that pick a CPU without the scheduling classes.
        An affinity change that excludes the task's CPU sends it to a CPU
        of the new set (__set_cpus_allowed_ptr_locked()): a hog on --cpu
        is allowed on --widen, where most CPUs are parked, and sent back,
        --rounds times; report its CPU right after each change. Hotplug
        sends the tasks of a CPU going offline to select_fallback_rq(): a
        hog on --fallback-cpu, allowed on --fallback-allowed whose first
        CPU is parked, sees its CPU go offline (--fallback-rounds times,
        back online in between); report where it went each time.
        Each phase reports the hog's nr_migrations_cpu_non_preferred: a
        landing on a parked CPU that the push corrected later counts there.
    park_probe.py pushscan --cpu 7 [--stuck 100 --movable 100]
        The push's walk over a parked CPU's CFS tasks: --stuck spinning
        processes that may run on --cpu only and --movable ones that may
        run anywhere, all runnable on --cpu, then --cpu parked. Report
        where they are after the push (the movable ones must all have
        left, the stuck ones stay) and, from a trace of CPU switches, how
        long the CPU's stopper ran in all and at most at once (the push:
        a benchmark figure, not an assertion).
    park_probe.py hotplug --cpus 2-7 [--repeat R]
        For comparison with parking: how long taking the same CPUs offline
        and bringing them back takes, under the same CPU hog.
"""
import argparse
import ctypes
import os
import random
import re
import select
import signal
import subprocess
import threading
import time

from .. import schedstat
from ..cpulist import format_cpulist, parse_cpulist
from . import kernel, print_result, start_running, stop_hogs, trace, until

EVENTS = ("sched/sched_switch", "timer/hrtimer_expire_entry")
# Tasks of the workloads this probe starts (comm prefixes).
WORKLOAD = ("hackbench", "stress-ng", "cyclictest")


def park(cpus):
    """Write the parked set; return (errno or 0, ns the write took)."""
    t0 = time.perf_counter_ns()
    try:
        kernel.set_parked(cpus)
        err = 0
    except OSError as e:
        err = e.errno
    return err, time.perf_counter_ns() - t0


LINE_RE = re.compile(r"\[(?P<cpu>\d+)\]\s+\S+\s+(?P<ts>\d+\.\d+): (?P<event>\w+): (?P<rest>.*)")
SWITCH_RE = re.compile(r"prev_comm=(?P<prev>.*?) prev_pid=\d+ .*==> "
                       r"next_comm=(?P<next>.*?) next_pid=\d+")
TICK_RE = re.compile(r"function=tick_(nohz_handler|sched_timer)\b")


def is_workload(comm):
    return comm.startswith(WORKLOAD)


def parse_events(text):
    """(ts, cpu, kind, data) for switches, ticks and markers, in order."""
    out = []
    for line in text.splitlines():
        m = LINE_RE.search(line)
        if not m:
            continue
        ts, cpu, ev, rest = float(m["ts"]), int(m["cpu"]), m["event"], m["rest"]
        if ev == "sched_switch":
            s = SWITCH_RE.search(rest)
            if s:
                out.append((ts, cpu, "switch", (s["prev"], s["next"])))
        elif ev == "hrtimer_expire_entry":
            if TICK_RE.search(rest):
                out.append((ts, cpu, "tick", None))
        elif ev == "tracing_mark_write":
            out.append((ts, cpu, "marker", rest.strip()))
    return out


def evacuation(events, cpus):
    """Per CPU of `cpus`: workload before parking, how long (in that CPU's
    ticks and in seconds) workload tasks stayed after the write began, the
    same in ticks after it returned, and the workload it ran again after
    unparking. A workload task still running when the CPUs are unparked
    stayed the whole time."""
    t_park = next(ts for ts, _, k, d in events if k == "marker" and d == "PARK")
    # The write has returned: the set is in place and the pushes are queued.
    t_parked = next((ts for ts, _, k, d in events if k == "marker" and d == "PARKED"),
                    t_park)
    t_unpark = next(ts for ts, _, k, d in events if k == "marker" and d == "UNPARK")
    res = {}
    for cpu in cpus:
        before = after = 0
        last = None          # last moment a workload task was on it while parked
        on = False           # a workload task is running on it
        unparked = False
        ticks = []
        for ts, c, kind, data in events:
            if c != cpu or kind == "marker":
                continue
            if ts >= t_unpark and not unparked:
                unparked = True
                if on:
                    last = t_unpark
            if kind == "tick":
                ticks.append(ts)
                continue
            prev, nxt = data
            if ts < t_park:
                before += is_workload(nxt)
            elif ts < t_unpark:
                if is_workload(prev) or is_workload(nxt):
                    last = ts
            else:
                after += is_workload(nxt)
            on = is_workload(nxt)
        if on and not unparked:
            last = t_unpark
        stay = 0.0 if last is None else last - t_park
        res[cpu] = {
            "workload_before": before,
            "workload_after_unpark": after,
            "stay_ticks": 0 if last is None else sum(1 for t in ticks if t_park < t <= last),
            "stay_s": round(stay, 6),
            "stay_ticks_after_write": 0 if last is None else sum(
                1 for t in ticks if t_parked < t <= last),
            "ticks_while_parked": sum(1 for t in ticks if t_park < t < t_unpark),
        }
    return res


def schedstat_delta(before, after):
    """Per-CPU deltas of the park and steal fields."""
    per_cpu = schedstat.text_deltas(before, after)["per_cpu"]
    return {cpu: {k: v for k, v in d.items() if k.startswith(("park_", "steal"))}
            for cpu, d in per_cpu.items()}


def hackbench(loops, wait=True):
    cmd = ["hackbench", "-P", "-g", "2", "-l", str(loops)]
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return subprocess.run(cmd, capture_output=True, text=True).returncode


def workload_cpus():
    """CPUs on which a workload task is running or runnable right now."""
    found = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = kernel.read(f"/proc/{pid}/stat")
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat.rsplit(")", 1)[1].split()
        if is_workload(comm) and rest[0] == "R":
            found.add(int(rest[36]))
    return found


def wait_for_workload_on(cpus, tries=2000):
    """Poll until a workload task runs on one of `cpus` (bounded)."""
    for _ in range(tries):
        if workload_cpus() & set(cpus):
            return True
    return False


def cmd_evacuate(args):
    cpus = parse_cpulist(args.park)
    for f in args.feature:
        kernel.set_feature(f)
    kernel.enable_schedstats()
    bg = [subprocess.Popen(["stress-ng", "--cpu", str(args.hog), "--quiet"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    if args.rt:
        bg.append(subprocess.Popen(["cyclictest", "-q", "-p", "20", "-t", "2",
                                    "-i", "2000"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL))
    result = {"status": []}
    try:
        start = kernel.read_schedstat()
        trace.start(EVENTS, 8192)
        # Park while hackbench and the hog run on the CPUs to park.
        hb = hackbench(args.loops, wait=False)
        result["workload_seen"] = wait_for_workload_on(cpus)
        s0 = kernel.read_schedstat()
        trace.marker("PARK")
        result["park_errno"], result["write_ns"] = park(args.park)
        trace.marker("PARKED")
        s0w = kernel.read_schedstat()
        result["parked"] = kernel.parked()
        result["status"].append(hb.wait())
        s1 = kernel.read_schedstat()
        trace.marker("UNPARK")
        result["unpark_errno"], result["unpark_write_ns"] = park("")
        result["parked_after_unpark"] = kernel.parked()
        result["status"].append(hackbench(args.loops))
        end = kernel.read_schedstat()
        text, result["trace_lost"] = trace.stop()
        if args.keep_trace:
            with open(args.keep_trace, "w") as f:
                f.write(text)
    finally:
        stop_hogs(bg)
        park("")
    result["cpus"] = evacuation(parse_events(text), cpus)
    # Pushes and evacuations from just before the write; steal attempts
    # from just after it (a steal already under way may finish).
    result["schedstat_parked"] = schedstat_delta(s0, s1)
    result["schedstat_after_write"] = schedstat_delta(s0w, s1)
    result["schedstat_whole_run"] = schedstat_delta(start, end)
    return print_result(result)


def cmd_badinput(args):
    online = kernel.online_cpus()
    last = online[-1]
    cases = ["abc", "1-", "2-1", "0x3", str(last + 1), "4096", "-1",
             format_cpulist(online)]
    result = {"cases": [], "trail": []}

    def snap(step):
        # cpu_preferred_mask, kept by parking and hotplug (park/0009),
        # against the set it must equal: online (= active here) less parked.
        result["trail"].append({"step": step, "online": format_cpulist(kernel.online_cpus()),
                                "parked": kernel.parked(), "preferred": kernel.preferred()})

    park("")
    snap("unparked")
    err, _ = park("1")
    result["setup"] = [err, kernel.parked()]
    snap("parked 1")
    for c in cases:
        before = kernel.parked()
        err, _ = park(c)
        result["cases"].append({"input": c, "errno": err, "before": before,
                                "after": kernel.parked()})
    # A CPU that is offline.
    kernel.set_online(last, False)
    try:
        before = kernel.parked()
        err, _ = park(str(last))
        result["cases"].append({"input": f"{last} (offline)", "errno": err,
                                "before": before, "after": kernel.parked()})
        snap(f"{last} offline")
    finally:
        kernel.set_online(last, True)
    # Parked, then taken offline: it leaves the set.
    err, _ = park(str(last))
    kernel.set_online(last, False)
    result["offlined_parked"] = [err, kernel.parked()]
    snap(f"{last} parked, then offline")
    kernel.set_online(last, True)
    result["after_online"] = kernel.parked()
    snap(f"{last} online again")
    # Valid writes, then the empty write.
    err, _ = park("2-3")
    result["valid"] = [err, kernel.parked()]
    snap("parked 2-3")
    result["rollback"] = offline_rollbacks(last, snap)
    result["stopped"] = offline_stopped_midway(last)
    result["stopped_refused"] = offline_stopped_refused(last)
    result["stopped_self"] = offline_stopped_park_self(last)
    park("2-3")
    result["preferred"] = kernel.preferred()
    try:
        kernel.write(kernel.PREFERRED, "1\n")
        result["preferred_write_errno"] = 0
    except OSError as e:
        result["preferred_write_errno"] = e.errno
    result["preferred_after_write"] = kernel.preferred()
    err, _ = park("")
    result["empty"] = [err, kernel.parked()]
    snap("empty write")
    # Writers racing: the set ends as one of the valid sets written.
    sets = [format_cpulist(sorted(random.sample(online[1:], k)))
            for k in range(1, len(online) - 1) for _ in range(3)]
    kids = []
    for i in range(4):
        pid = os.fork()
        if pid == 0:
            rng = random.Random(i)
            bad = 0
            for _ in range(100):
                bad += park(rng.choice(sets))[0] != 0
            os._exit(1 if bad else 0)
        kids.append(pid)
    result["racers_ok"] = all(os.waitpid(k, 0)[1] == 0 for k in kids)
    final = kernel.parked()
    result["race_final"] = final
    result["race_final_is_written"] = final in sets
    snap("after the racing writers")
    park("")
    return print_result(result)


def offline_that_fails(cpu):
    """Take `cpu` offline with a step below sched:active made to fail, so
    that the offline rolls back through sched_cpu_activate(); return the
    errno of the online write (0 if the CPU went offline after all)."""
    kernel.set_hotplug_fail(cpu, kernel.hotplug_state("workqueue:online"))
    try:
        kernel.set_online(cpu, False)
        return 0
    except OSError as e:
        return e.errno
    finally:
        kernel.set_online(cpu, True)


def offline_rollbacks(last, snap=None):
    """A parked CPU whose offline fails, and the last unparked CPU whose
    offline fails (the others were unparked on the way down): the set
    must be as before. snap(step), if given, records the preferred set
    after each."""
    cases = []
    # (x86 cannot take CPU 0 offline.)
    for parked, cpu in ((str(last), last), (f"0-{last - 1}", last)):
        err, _ = park(parked)
        before = kernel.parked()
        errno = offline_that_fails(cpu)
        cases.append({"parked": parked, "cpu": cpu, "park_errno": err, "before": before,
                      "offline_errno": errno, "online": cpu in kernel.online_cpus(),
                      "after": kernel.parked()})
        if snap:
            snap(f"offline of {cpu} rolled back, {parked} parked")
    park("")
    return cases


def stop_midway(cpu):
    """`cpu` taken towards offline and stopped at workqueue:online, below
    sched:active (hotplug/target: inactive, still online, the hotplug
    lock released); resume(cpu) brings it back. The errno when the kernel
    refuses the target (EINVAL without CONFIG_CPU_HOTPLUG_STATE_CONTROL:
    a distribution kernel), else None."""
    try:
        kernel.set_hotplug_target(cpu, kernel.hotplug_state("workqueue:online"))
    except OSError as e:
        return e.errno
    return None


def resume(cpu, got):
    """Bring `cpu` back online from stop_midway(). Called from a
    `finally`: an error is recorded as got["resume_errno"] rather than
    raised, so that it does not hide the exception being handled, and the
    result still reaches the test (which asserts it absent)."""
    try:
        kernel.set_hotplug_target(cpu, kernel.hotplug_state("online"))
    except OSError as e:
        got["resume_errno"] = e.errno


def offline_stopped_midway(cpu):
    """`cpu` parked, then stopped on its way offline (stop_midway()); the
    set written empty meanwhile; then the CPU brought back. The write
    must stand: the set saved for a rollback of that offline is stale."""
    err, _ = park(str(cpu))
    got = {"park_errno": err, "parked": kernel.parked(),
           "stop_state": kernel.hotplug_state("workqueue:online"),
           "active_state": kernel.hotplug_state("sched:active")}
    refused = stop_midway(cpu)
    if refused:
        park("")
        return {"target_errno": refused}
    try:
        got["state_while_stopped"] = int(
            kernel.read(f"{kernel.CPU_SYSFS}/cpu{cpu}/hotplug/state").strip())
        got["write_errno"], _ = park("")
        got["parked_while_stopped"] = kernel.parked()
    finally:
        resume(cpu, got)
    got["online"] = cpu in kernel.online_cpus()
    got["after"] = kernel.parked()
    got["preferred"] = kernel.preferred()
    park("")
    return got


def offline_stopped_refused(cpu):
    """`cpu` parked and stopped on its way offline as above; two deadline
    sleepers of half a CPU admitted (7 unparked CPUs hold them); then a
    park of every CPU but 0 and `cpu`, which would strand them: refused
    with EBUSY, and a refused write changes nothing, the set saved for
    the rollback included. Brought back, `cpu` is parked again, and the
    scheduler treats it so: taken offline for good, it leaves the set
    (a CPU parked while parking is switched off would stay in it)."""
    err, _ = park(str(cpu))
    got = {"park_errno": err}
    tasks = []
    refused = stop_midway(cpu)
    if refused:
        park("")
        return {"target_errno": refused}
    try:
        half = argparse.Namespace(runtime_us=5000, period_us=10000)
        for _ in range(2):
            t = start_dl_sleeper(half)
            got.setdefault("admitted", []).append(t is not None)
            if t:
                tasks.append(t)
        got["write_errno"], _ = park(format_cpulist(
            [c for c in kernel.online_cpus() if c not in (0, cpu)]))
        got["parked_while_stopped"] = kernel.parked()
    finally:
        stop_hogs(tasks)
        resume(cpu, got)
    got["after"] = kernel.parked()
    got["preferred"] = kernel.preferred()
    kernel.set_online(cpu, False)
    got["parked_when_offline"] = kernel.parked()
    kernel.set_online(cpu, True)
    got["parked_when_online"] = kernel.parked()
    park("")
    return got


def offline_stopped_park_self(cpu):
    """Review 44: `cpu` stopped on its way offline (stop_midway(): online
    but inactive), then a write that parks `cpu` itself, then the offline
    completed. A CPU that goes offline leaves the set: the write is
    refused (EINVAL: the stopped CPU's root domain has no active CPU left
    to run its tasks), or the CPU leaves the set when it dies."""
    got = {}
    refused = stop_midway(cpu)
    if refused:
        return {"target_errno": refused}
    try:
        got["write_errno"], _ = park(str(cpu))
        got["parked_while_stopped"] = kernel.parked()
        kernel.set_online(cpu, False)
    except OSError as e:
        got["offline_errno"] = e.errno
        resume(cpu, got)
    got["online_after_offline"] = cpu in kernel.online_cpus()
    got["parked_when_offline"] = kernel.parked()
    kernel.set_online(cpu, True)
    got["parked_when_online"] = kernel.parked()
    got["preferred"] = kernel.preferred()
    park("")
    return got


def cmd_stopself(args):
    """offline_stopped_park_self() on the last CPU alone, with the default
    root domain as the kernel was booted (isolcpus=domain,N puts an active
    CPU there, and the write that parks the stopped CPU is accepted)."""
    last = kernel.online_cpus()[-1]
    result = {"isolated": kernel.read(f"{kernel.CPU_SYSFS}/isolated").strip()}
    result["stopped_self"] = offline_stopped_park_self(last)
    return print_result(result)


def allowed_list(pid):
    """The task's affinity as set (/proc's Cpus_allowed_list), offline
    CPUs included; sched_getaffinity() gives only its active CPUs."""
    return re.search(r"Cpus_allowed_list:\s*(\S+)", kernel.read(f"/proc/{pid}/status"))[1]


def park_counting_pinned(cpus, cpu):
    """Park `cpus`; return (errno, whether `cpu`'s park_pinned moved),
    waiting for the count a bounded while."""
    s0 = kernel.read_schedstat()
    err, _ = park(cpus)

    def counted():
        return schedstat_delta(s0, kernel.read_schedstat())[cpu]["park_pinned"] >= 1
    return err, until(counted, tries=500)


def utime(pid):
    return int(kernel.read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[11])


# Upstream's per-task count of moves off a non-preferred CPU.
NON_PREFERRED = "nr_migrations_cpu_non_preferred"


def cmd_pinned(args):
    kernel.enable_schedstats()
    # The shell is pinned before it forks the hog: pinned from birth.
    hog = subprocess.Popen(["taskset", "-c", str(args.cpu), "sh", "-c",
                            "exec sh -c 'while :; do :; done'"])
    mover = None
    result = {}
    try:
        # Poll until taskset has pinned it (bounded: taskset fails or not).
        until(lambda: allowed_list(hog.pid) == str(args.cpu), tries=1000)
        mover, = start_hogs(str(args.mover), 1)
        until(lambda: kernel.task_cpu(mover.pid) == args.mover, tries=1000)
        result["mover_before"] = {"cpu": kernel.task_cpu(mover.pid),
                                  "moves": task_sched(mover.pid, NON_PREFERRED)}
        s0 = kernel.read_schedstat()
        err, _ = park(args.park)
        result["park_errno"] = err
        # Widened only once parked: widened before, it may leave by an
        # active balance of its own (a vCPU's capacity drops with its
        # steal), which is no move off a parked CPU. Its CPU stays in the
        # new set, so the push or the balancer moves it.
        os.sched_setaffinity(mover.pid, set(kernel.online_cpus()))
        # Bounded: a kernel that never pushes it fails here, and the test
        # reads where it stayed.
        until(lambda: kernel.task_cpu(mover.pid) not in parse_cpulist(args.park),
              tries=1000)
        # The CPU changes before the move is counted (same locked section;
        # a vCPU the host stalls can stretch it): wait for the count too.
        until(lambda: (task_sched(mover.pid, NON_PREFERRED) or 0) >= 1, tries=200)
        result["mover_after"] = {"cpu": kernel.task_cpu(mover.pid),
                                 "moves": task_sched(mover.pid, NON_PREFERRED)}
        u0 = utime(hog.pid)
        result["status"] = hackbench(args.loops)
        u1 = utime(hog.pid)
        result["status2"] = hackbench(args.loops)
        u2 = utime(hog.pid)
        s1 = kernel.read_schedstat()
        result["utime"] = [u0, u1, u2]
        result["affinity"] = allowed_list(hog.pid)
        result["cpu"] = kernel.task_cpu(hog.pid)
        result["pid"] = hog.pid
        result["pinned_moves"] = task_sched(hog.pid, NON_PREFERRED)
    finally:
        stop_hogs([hog] + ([mover] if mover else []))
        park("")
    result["schedstat"] = schedstat_delta(s0, s1)
    log = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
    result["log_lines"] = [ln for ln in log.splitlines()
                           if "parked CPU" in ln and f"[{result['pid']}]" in ln]
    return print_result(result)


BUSY_LOOP = ["sh", "-c", "while :; do :; done"]


def cmd_pinnedeach(args):
    """One hog pinned to each CPU of --cpus, then those CPUs parked: every
    parked CPU's push finds a task it cannot move at about the same tick,
    and each must be reported by its own log line (the rate limit's burst
    is 10 per 5 s; keep rounds x CPUs within it, or --gap past it)."""
    kernel.enable_schedstats()
    cpus = parse_cpulist(args.cpus)
    result = {"rounds": []}
    pids = []
    for r in range(args.rounds):
        if r and args.gap:
            # Only to show the rate limit's effect apart from its burst
            # (the repro, not a test): wait out its window.
            time.sleep(args.gap)
        hogs = []
        try:
            for cpu in cpus:
                hogs += start_hogs(str(cpu), 1)
            until(lambda: all(kernel.task_cpu(h.pid) == c for h, c in zip(hogs, cpus)),
                  tries=1000)
            s0 = kernel.read_schedstat()
            err, _ = park(args.cpus)

            def counted():
                d = schedstat_delta(s0, kernel.read_schedstat())
                return all(d[c]["park_pinned"] >= 1 for c in cpus)
            result["rounds"].append({"park_errno": err, "counted": until(counted, tries=1000),
                                     "pids": [h.pid for h in hogs]})
            pids += [h.pid for h in hogs]
        finally:
            stop_hogs(hogs)
            park("")
    log = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
    lines = [ln for ln in log.splitlines() if "parked CPU" in ln]
    result["lines"] = {str(pid): sum(f"[{pid}]" in ln for ln in lines) for pid in pids}
    result["missing"] = sum(n == 0 for n in result["lines"].values())
    return print_result(result)


def start_hogs(cpus, n):
    """n busy loops allowed on the cpulist `cpus` (taskset execs the shell
    that runs the loop: pinned from birth), returned once every one has
    that affinity (a bounded poll)."""
    hogs = [subprocess.Popen(["taskset", "-c", cpus, *BUSY_LOOP]) for _ in range(n)]
    want = set(parse_cpulist(cpus))
    until(lambda: all(os.sched_getaffinity(h.pid) == want for h in hogs), tries=1000)
    return hogs


def settle(pids, parked_cpus):
    """Wait (bounded) until none of the tasks is on a parked CPU: the first
    push. What happens after it is what the probes measure."""
    return until(lambda: not {kernel.task_cpu(pid) for pid in pids} & parked_cpus,
                 tries=1000)


MIN_SAMPLE_ROUNDS = 100


def sample_parked(pids, parked_cpus, seconds):
    """For `seconds`, and for at least MIN_SAMPLE_ROUNDS rounds (a loaded
    guest fits fewer 10 ms rounds in the time), sample where the tasks run.
    Returns the number of samples (a round samples every task), how many
    found a task on a parked CPU, and the schedstat delta over the
    sampling."""
    s0 = kernel.read_schedstat()
    samples = on_parked = rounds = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end or rounds < MIN_SAMPLE_ROUNDS:
        on_parked += sum(kernel.task_cpu(pid) in parked_cpus for pid in pids)
        samples += len(pids)
        rounds += 1
        time.sleep(0.01)        # the sampling interval
    return samples, on_parked, schedstat_delta(s0, kernel.read_schedstat())


def cmd_pingpong(args):
    kernel.enable_schedstats()
    parked_cpus = set(parse_cpulist(args.park))
    err, _ = park(args.park)
    result = {"park_errno": err, "parked": kernel.parked()}
    hogs = start_hogs(args.cpus, args.hogs)
    try:
        pids = [h.pid for h in hogs]
        result["settled"] = settle(pids, parked_cpus)
        u0 = [utime(pid) for pid in pids]
        (result["samples"], result["on_parked"],
         result["schedstat"]) = sample_parked(pids, parked_cpus, args.seconds)
        result["utime"] = [u0, [utime(pid) for pid in pids]]
    finally:
        stop_hogs(hogs)
        park("")
    return print_result(result)


RT_RUNTIME = "/proc/sys/kernel/sched_rt_runtime_us"


def rt_hog(cpus, prio):
    """A SCHED_FIFO busy loop (chrt, then taskset, exec it); returned once
    its loop runs (a wakeup before that is a placement of its own), with
    its policy and affinity in place. The policy comes first: pinned
    first, a CFS task could never run on a CPU an RT hog holds, not even
    to become RT."""
    hog = start_running(["chrt", "-f", str(prio), "taskset", "-c", cpus])
    want = set(parse_cpulist(cpus))
    if not (os.sched_getscheduler(hog.pid) == os.SCHED_FIFO
            and os.sched_getparam(hog.pid).sched_priority == prio
            and os.sched_getaffinity(hog.pid) == want):
        raise RuntimeError(f"RT hog {hog.pid} has not got FIFO {prio} on {cpus}")
    return hog


def stop_rt_hogs(hogs, runtime):
    """Throttling back on first, then the highest priority first: a hog
    can only die when it runs, and with throttling off a lower one never
    runs while a higher one holds its CPU."""
    kernel.write(RT_RUNTIME, runtime)
    stop_hogs(hogs)


# Says it is up, waits for a byte, then says where it runs (/proc's
# processor field) and exits.
RT_WAITER = ["python3", "-c", "import os, sys\nprint('up', flush=True)\n"
             "sys.stdin.read(1)\n"
             "print(open('/proc/self/stat').read().rsplit(')', 1)[1].split()[36], flush=True)"]


def start_waiter(prefix, tasks):
    """`prefix` (chrt, taskset) + RT_WAITER, appended to `tasks`; returned
    once it sleeps in its read (a bounded poll), so that nothing started
    after it can take its CPU before it is asleep there."""
    waiter = subprocess.Popen([*prefix, *RT_WAITER],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    tasks.append(waiter)
    if waiter.stdout.readline().strip() != "up":
        raise RuntimeError("the waiter did not start")
    if not until(lambda: kernel.task_state(waiter.pid) == "S", tries=1000):
        raise RuntimeError("the waiter did not go to sleep")
    return waiter


def wake_waiter(waiter, wait_s):
    """Wake a start_waiter() task; the CPU it then ran on, or None when it
    did not run within wait_s."""
    waiter.stdin.write("x")
    waiter.stdin.flush()
    ready, _, _ = select.select([waiter.stdout], [], [], wait_s)
    line = waiter.stdout.readline().strip() if ready else None
    return int(line) if line else None


def rt_case_reset(hogs, runtime):
    """Between two RT cases: their tasks stopped (`hogs` emptied in
    place), nothing parked, CPU 5 online."""
    stop_rt_hogs(hogs, runtime)
    hogs.clear()
    park("")
    if 5 not in kernel.online_cpus():
        kernel.set_online(5, True)


def rt_mixed_wakeup(hogs, wait_s=10):
    """Review 44b: an RT task allowed on 5-7 with 5 offline and 6-7
    parked has no active unparked CPU, so its class may place it on any of
    its parked CPUs. It sleeps on CPU 6, a FIFO 20 hog holds 6 (RT
    throttling off), and it is woken: it must run on the free CPU 7, not
    queue behind the hog. Returns where it ran (None: it never ran within
    wait_s), with the park's errno. Appends what it starts to `hogs`."""
    kernel.write(RT_RUNTIME, "-1")
    # Asleep in its read before the hog takes CPU 6.
    waiter = start_waiter(["chrt", "-f", "10", "taskset", "-c", "6"], hogs)
    os.sched_setaffinity(waiter.pid, {5, 6, 7})
    hogs.append(rt_hog("6", 20))
    kernel.set_online(5, False)
    got = {"affinity": allowed_list(waiter.pid), "cpu_before": kernel.task_cpu(waiter.pid)}
    got["park_errno"], _ = park("6-7")
    got["ran_on"] = wake_waiter(waiter, wait_s)
    return got


def rt_mixed_queued(hogs, tries=300):
    """Review 45: the same affinity, but the task is already queued on CPU
    6 behind a higher one when CPU 7 becomes free. Parked CPUs do not
    pull; parked CPU 6's push (from its tick, at most every 100 ms) or,
    before review 45b's fix, the RT push after each run of its stopper
    must take it to 7 (a bounded poll).
    Appends what it starts to `hogs`."""
    kernel.write(RT_RUNTIME, "-1")
    task = rt_hog("6", 10)
    hogs.append(task)
    os.sched_setaffinity(task.pid, {5, 6, 7})
    top = rt_hog("7", 30)
    hogs.append(top)
    kernel.set_online(5, False)
    got = {"affinity": allowed_list(task.pid)}
    got["park_errno"], _ = park("6-7")
    hogs.append(rt_hog("6", 20))
    got["cpu_before"] = kernel.task_cpu(task.pid)
    stop_hogs([top])
    got["moved"] = until(lambda: kernel.task_cpu(task.pid) == 7, tries=tries)
    got["cpu_after"] = kernel.task_cpu(task.pid)
    return got


def rt_parked_second(hogs, tries=300):
    """Review 45b: with 5-7 parked, two tasks with no preferred CPU queued
    on 6 behind a FIFO 30 hog: FIFO 20 allowed on 6-7 (7 runs a FIFO 25)
    and FIFO 10 allowed on 5-6. CPU 5 is held by a FIFO 40 hog, which
    then leaves. RT's push tries only its highest pushable task, FIFO 20,
    which has nowhere to go, and parked CPUs do not pull: only parked CPU
    6's push can take FIFO 10 to the idle CPU 5 (a bounded poll; the push
    runs from 6's tick at most every 100 ms). Appends what it starts to
    `hogs`."""
    kernel.write(RT_RUNTIME, "-1")
    got = {}
    got["park_errno"], _ = park("5-7")
    hogs.append(rt_hog("7", 25))
    holder = rt_hog("5", 40)
    hogs.append(holder)
    low = rt_hog("6", 10)
    hogs.append(low)
    os.sched_setaffinity(low.pid, {5, 6})
    mid = rt_hog("6", 20)
    hogs.append(mid)
    os.sched_setaffinity(mid.pid, {6, 7})
    hogs.append(rt_hog("6", 30))
    got["cpus_before"] = [kernel.task_cpu(low.pid), kernel.task_cpu(mid.pid)]
    got["moves_before"] = task_sched(low.pid, NON_PREFERRED)
    stop_hogs([holder])
    got["moved"] = until(lambda: kernel.task_cpu(low.pid) == 5, tries=tries)
    got["cpus_after"] = [kernel.task_cpu(low.pid), kernel.task_cpu(mid.pid)]
    # Only the parked CPU's push counts a move here (not RT's push or
    # pull); counted in the same locked section as the move (bounded poll).
    until(lambda: (task_sched(low.pid, NON_PREFERRED) or 0) >= 1, tries=200)
    got["moves_after"] = task_sched(low.pid, NON_PREFERRED)
    return got


def rt_equal_wakeup(hogs, wait_s=10):
    """Equal priorities: a FIFO 10 task allowed on 0 and 7, asleep on 0,
    with 7 parked, is woken while a FIFO 10 hog allowed on 0-1 runs on 0
    and CPU 1 is idle. The task has an unparked CPU (0), so its class
    keeps it off 7, and it queues on 0 behind the hog. The hog could move
    to 1: check_preempt_equal_prio() must ask for that (the task runs,
    the hog is pushed to 1), unless it counts the parked CPU 7 as a place
    the task could go, when the task waits behind the hog, for good (RT
    throttling off). Returns where it ran (None: not within wait_s) and
    where the hog runs after. Appends what it starts to `hogs`."""
    kernel.write(RT_RUNTIME, "-1")
    waiter = start_waiter(["chrt", "-f", "10", "taskset", "-c", "0"], hogs)
    os.sched_setaffinity(waiter.pid, {0, 7})
    hog = rt_hog("0", 10)
    hogs.append(hog)
    os.sched_setaffinity(hog.pid, {0, 1})
    got = {"cpu_before": kernel.task_cpu(waiter.pid), "hog_before": kernel.task_cpu(hog.pid)}
    got["park_errno"], _ = park("7")
    got["ran_on"] = wake_waiter(waiter, wait_s)
    # The hog's push follows the switch to the task at once (bounded poll).
    until(lambda: kernel.task_cpu(hog.pid) == 1, tries=100)
    got["hog_after"] = kernel.task_cpu(hog.pid)
    return got


def rt_parked_pinned_curr(hogs, wait_s=10):
    """Review 46: a FIFO 10 hog allowed on CPU 0 and the parked CPU 7 runs
    on 0; CPU 1 is idle. It keeps off 7, so it cannot leave 0, as if
    pinned there. A FIFO 20 task allowed on 0-1, asleep on 0, is woken:
    select_task_rq_rt() sends a waking task elsewhere only when the one it
    would preempt cannot move, and counted the parked CPU as a place the
    hog could go: the task preempted the hog on 0, and the hog had nowhere
    to go. It must run on the idle CPU 1. Returns where it ran and where
    the hog is after. Appends what it starts to `hogs`."""
    kernel.write(RT_RUNTIME, "-1")
    waiter = start_waiter(["chrt", "-f", "20", "taskset", "-c", "0"], hogs)
    os.sched_setaffinity(waiter.pid, {0, 1})
    hog = rt_hog("0", 10)
    hogs.append(hog)
    os.sched_setaffinity(hog.pid, {0, 7})
    got = {"cpu_before": kernel.task_cpu(waiter.pid), "hog_before": kernel.task_cpu(hog.pid)}
    got["park_errno"], _ = park("7")
    got["ran_on"] = wake_waiter(waiter, wait_s)
    got["hog_after"] = kernel.task_cpu(hog.pid)
    return got


def cmd_rt(args):
    kernel.enable_schedstats()
    runtime = kernel.read(RT_RUNTIME).strip()
    hogs = []
    result = {}
    try:
        # No RT throttling: nothing but a push moves the preempted task.
        kernel.write(RT_RUNTIME, "-1")
        err, _ = park("7")
        result["park_errno"] = err
        hogs += [rt_hog("1", 5), rt_hog("2", 5)]
        mid = rt_hog("0", 10)
        hogs.append(mid)
        os.sched_setaffinity(mid.pid, {0, 1, 2, 7})
        result["mid_cpu_before"] = kernel.task_cpu(mid.pid)
        hogs.append(rt_hog("0", 20))
        result["mid_moved"] = until(lambda: kernel.task_cpu(mid.pid) in (1, 2), tries=300)
        result["mid_cpu"] = kernel.task_cpu(mid.pid)
        stop_rt_hogs(hogs, runtime)
        hogs = []
        # An RT task pinned to a CPU that gets parked.
        pinned = rt_hog("6", 10)
        hogs.append(pinned)
        result["park2_errno"], result["pinned_counted"] = park_counting_pinned("6-7", 6)
        result["pinned_cpu"] = kernel.task_cpu(pinned.pid)
        result["pinned_pid"] = pinned.pid
        stop_rt_hogs(hogs, runtime)
        hogs = []
        park("")
        # Review 44: an RT task allowed on 5-6; 5 taken offline (its
        # affinity keeps 5) and 6 parked. No active unparked CPU is left
        # to it, as for a task pinned to 6: it stays, counted and reported.
        kernel.write(RT_RUNTIME, "-1")
        two = rt_hog("5-6", 10)
        hogs.append(two)
        kernel.set_online(5, False)
        result["two_affinity"] = allowed_list(two.pid)
        result["park3_errno"], result["two_counted"] = park_counting_pinned("6", 6)
        result["two_cpu"] = kernel.task_cpu(two.pid)
        result["two_pid"] = two.pid
        for key, case in (("mixed", rt_mixed_wakeup), ("queued", rt_mixed_queued),
                          ("second", rt_parked_second), ("equal", rt_equal_wakeup),
                          ("pinnedcurr", rt_parked_pinned_curr)):
            rt_case_reset(hogs, runtime)
            result[key] = case(hogs)
    finally:
        stop_rt_hogs(hogs, runtime)
        park("")
        if 5 not in kernel.online_cpus():
            kernel.set_online(5, True)
    log = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
    # "parked CPU": the line before and after review 44's rewording.
    for key, pid in (("log_lines", result.get("pinned_pid")), ("two_log_lines", result.get("two_pid"))):
        result[key] = [ln for ln in log.splitlines() if "parked CPU" in ln and f"[{pid}]" in ln]
    return print_result(result)


SCHED_DEADLINE = 6
# 2 ms every 20 ms: a tenth of one CPU, well inside the default admission
# limit (95% of the root domain).
DL_PARAMS = ["--sched-runtime", "2000000", "--sched-deadline", "20000000",
             "--sched-period", "20000000"]
# Says it is up, waits for a byte, then wakes every 3 ms.
DL_SLEEPER = ["python3", "-c", "import sys, time\nprint('up', flush=True)\n"
              "sys.stdin.read(1)\nwhile True: time.sleep(0.003)"]


def dl_task(cpu, cmd, gated=False):
    """`cmd` started on `cpu`, then made SCHED_DEADLINE there. A deadline
    task must be allowed on its whole root domain, so it is started
    pinned, widened, then switched. A gated one (DL_SLEEPER) is widened
    only once it sleeps on its stdin: a wakeup in between would place it
    anywhere; it then wakes on its last CPU. A busy one may still move:
    at each replenishment the deadline push may send it to a free CPU."""
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE} if gated else {}
    proc = subprocess.Popen(["taskset", "-c", str(cpu), *cmd], text=True, **pipes)
    if not until(lambda: os.sched_getaffinity(proc.pid) == {cpu}, tries=1000):
        raise RuntimeError(f"{cmd[0]} (pid {proc.pid}) never got pinned to CPU {cpu}")
    if gated:
        assert proc.stdout.readline().strip() == "up"
        if not until(lambda: kernel.task_state(proc.pid) == "S", tries=1000):
            raise RuntimeError(f"{cmd[0]} (pid {proc.pid}) never slept on its stdin")
    os.sched_setaffinity(proc.pid, set(range(os.cpu_count())))
    subprocess.run(["chrt", "-d", *DL_PARAMS, "-p", "0", str(proc.pid)], check=True)
    return proc


def cmd_dl(args):
    """Deadline tasks on CPUs that get parked: a busy loop (never wakes:
    throttled and replenished every period) and a sleeper (wakes every
    3 ms, from its last CPU). One per CPU: two deadline tasks on one CPU
    push each other apart."""
    kernel.enable_schedstats()
    result = {}
    tasks = []
    cpus = {"busy": args.busy_cpu, "sleeper": args.sleeper_cpu}
    parked = set(cpus.values())
    # Off the CPUs under test: nothing there but the task under test.
    os.sched_setaffinity(0, set(range(os.cpu_count())) - parked)
    try:
        for what, cmd in (("busy", BUSY_LOOP), ("sleeper", DL_SLEEPER)):
            t = dl_task(cpus[what], cmd, gated=what == "sleeper")
            tasks.append(t)
            result[what] = {"pid": t.pid,
                            "deadline": os.sched_getscheduler(t.pid) == SCHED_DEADLINE,
                            "cpu_before": kernel.task_cpu(t.pid)}
        s0 = kernel.read_schedstat()
        err, _ = park(",".join(map(str, sorted(parked))))
        result["park_errno"] = err
        tasks[1].stdin.write("x")       # the sleeper's first wakeup
        tasks[1].stdin.flush()
        for what, t in zip(("busy", "sleeper"), tasks):
            result[what]["left"] = until(
                lambda t=t: kernel.task_cpu(t.pid) not in parked, tries=300)
            result[what]["cpu_after"] = kernel.task_cpu(t.pid)
        # Once off, they stay off (sampled, 10 ms apart, for 1 s).
        back = 0
        for _ in range(100):
            back += sum(kernel.task_cpu(t.pid) in parked for t in tasks)
            time.sleep(0.01)        # the sampling interval
        result["samples_back"] = back
        delta = schedstat_delta(s0, kernel.read_schedstat())
        result["schedstat"] = {c: delta[c] for c in sorted(parked)}
        result["still_deadline"] = all(os.sched_getscheduler(t.pid) == SCHED_DEADLINE
                                       for t in tasks)
    finally:
        stop_hogs(tasks)
        park("")
    return print_result(result)


# 1 ms every 1 ms: a whole CPU, admitted only with admission control off.
# Its deadline is always within a tick or so: a task of DL_PARAMS (20 ms)
# queued behind it on its CPU runs there only once its own deadline is
# the earlier one, some 20 ms later; on a free CPU it runs at once.
DL_HOG_PARAMS = ["--sched-runtime", "1000000", "--sched-deadline", "1000000",
                 "--sched-period", "1000000"]


def dl_hog(cpu, params=DL_HOG_PARAMS):
    """A deadline busy loop (`params`) pinned to `cpu` (admission control
    off)."""
    hog = start_running(["chrt", "-d", *params, "0", "taskset", "-c", str(cpu)])
    if not (os.sched_getscheduler(hog.pid) == SCHED_DEADLINE
            and os.sched_getaffinity(hog.pid) == {cpu}):
        raise RuntimeError(f"deadline hog {hog.pid} is not pinned to {cpu}")
    return hog


def stop_dl_tasks(tasks, runtime):
    """The tasks first, then admission control back on: their bandwidth
    leaves the root domain when they die, and admission refuses to come
    back on while more is admitted than it allows."""
    stop_hogs(tasks)
    tasks.clear()
    kernel.write(RT_RUNTIME, runtime)


def to_deadline(pid, cpus):
    """Make a task SCHED_DEADLINE (DL_PARAMS), then allow it on `cpus`:
    with admission control off, a deadline task may have any affinity."""
    subprocess.run(["chrt", "-d", *DL_PARAMS, "-p", "0", str(pid)], check=True)
    os.sched_setaffinity(pid, cpus)
    if os.sched_getscheduler(pid) != SCHED_DEADLINE:
        raise RuntimeError(f"task {pid} is not SCHED_DEADLINE")


def dl_mixed_wakeup(tasks, wait_s=10):
    """Review 44b, deadline: a deadline task allowed on 5-7 with 5 offline
    and 6-7 parked has no active unparked CPU, so its class may place it
    on any of its parked CPUs. It sleeps on CPU 6, a deadline hog with
    earlier deadlines holds 6, and it is woken: it must run on the free
    CPU 7, not queue behind the hog (it then runs on 6, once its deadline
    is the earlier one: the stop-44 kernel). Admission control is off
    (only then may a deadline task have such an affinity). Returns where
    it ran (None: not within wait_s), with the park's errno. Appends what
    it starts to `tasks`."""
    kernel.write(RT_RUNTIME, "-1")
    # Asleep in its read before it becomes a deadline task.
    waiter = start_waiter(["taskset", "-c", "6"], tasks)
    to_deadline(waiter.pid, {5, 6, 7})
    tasks.append(dl_hog(6))
    kernel.set_online(5, False)
    got = {"affinity": allowed_list(waiter.pid), "cpu_before": kernel.task_cpu(waiter.pid)}
    got["park_errno"], _ = park("6-7")
    got["ran_on"] = wake_waiter(waiter, wait_s)
    return got


def dl_mixed_queued(tasks, tries=300):
    """The same affinity, but the task (a busy loop) is queued on CPU 6
    behind the hog when CPU 7, parked, is freed. Parked CPUs do not pull:
    a push must take it to 7 (the deadline push after each replenishment,
    or parked CPU 6's push from its tick; a bounded poll). Appends what
    it starts to `tasks`."""
    kernel.write(RT_RUNTIME, "-1")
    task = start_running(["taskset", "-c", "6"])
    tasks.append(task)
    top = dl_hog(7)
    tasks.append(top)
    tasks.append(dl_hog(6))
    # CPU 5 offline first: the deadline push would take the task there.
    kernel.set_online(5, False)
    to_deadline(task.pid, {5, 6, 7})
    got = {"affinity": allowed_list(task.pid)}
    got["park_errno"], _ = park("6-7")
    got["cpu_before"] = kernel.task_cpu(task.pid)
    stop_hogs([top])
    tasks.remove(top)
    got["moved"] = until(lambda: kernel.task_cpu(task.pid) == 7, tries=tries)
    got["cpu_after"] = kernel.task_cpu(task.pid)
    return got


# A whole CPU for a whole second: the hog runs without a break (runtime ==
# period: replenished as it runs out). A woken task's deadline at
# select_task_rq_dl() is the one left from its last activation (0 for a
# task that never ran as SCHED_DEADLINE): earlier than the hog's, so the
# fixed kernel's answer does not depend on the hog's phase. The old kernel
# could pass only if the task's new deadline (20 ms on) came after the
# hog's, which is due about 1 s after it starts: task_woken_dl() would
# then push it to CPU 1. Its wakeup comes well before that.
DL_LONG_HOG_PARAMS = ["--sched-runtime", "1000000000", "--sched-deadline", "1000000000",
                      "--sched-period", "1000000000"]


def dl_parked_pinned_curr(tasks, wait_s=10):
    """Review 46b, the deadline twin of rt_parked_pinned_curr(): a
    deadline hog of late deadlines allowed on CPU 0 and the parked CPU 7
    runs on 0; CPU 1 is idle. It keeps off 7, so it cannot leave 0, as if
    pinned there. A DL_PARAMS task allowed on 0-1, asleep on 0, is woken:
    select_task_rq_dl() keeps a waking task whose deadline is the earlier
    one where it woke, to preempt the running one, unless that one cannot
    move, and counted the parked CPU as a place the hog could go. The task
    must run on the idle CPU 1. Admission control is off (only then may a
    deadline task have such an affinity). Returns where it ran and where
    the hog is after. Appends what it starts to `tasks`."""
    kernel.write(RT_RUNTIME, "-1")
    waiter = start_waiter(["taskset", "-c", "0"], tasks)
    to_deadline(waiter.pid, {0, 1})
    hog = dl_hog(0, DL_LONG_HOG_PARAMS)
    tasks.append(hog)
    os.sched_setaffinity(hog.pid, {0, 7})
    got = {"cpu_before": kernel.task_cpu(waiter.pid), "hog_before": kernel.task_cpu(hog.pid),
           "hog_affinity": allowed_list(hog.pid)}
    got["park_errno"], _ = park("7")
    got["ran_on"] = wake_waiter(waiter, wait_s)
    got["hog_after"] = kernel.task_cpu(hog.pid)
    return got


# At the wakeup, CPU 0 may be running a fair task through its fair server
# rather than the hog (seen once in a full run, 2026-11-28: the task ran on
# CPU 0); the woken task then rightly preempts that task there. Without the
# fix it preempts the hog on CPU 0 in every try.
PINNED_CURR_TRIES = 3


def cmd_dlmixed(args):
    """Deadline tasks allowed on parked and offline CPUs only (admission
    control off): dl_mixed_wakeup(), then dl_mixed_queued(); then a
    wakeup beside a running deadline task that keeps off a parked CPU,
    dl_parked_pinned_curr()."""
    runtime = kernel.read(RT_RUNTIME).strip()
    # The probe itself off the CPUs of the cases: 0-1 and 5-7.
    os.sched_setaffinity(0, set(range(os.cpu_count())) - {0, 1, 5, 6, 7})
    tasks = []
    result = {}
    try:
        for key, case, tries in (("mixed", dl_mixed_wakeup, 1),
                                 ("queued", dl_mixed_queued, 1),
                                 ("pinnedcurr", dl_parked_pinned_curr, PINNED_CURR_TRIES)):
            for _ in range(tries):
                stop_dl_tasks(tasks, runtime)
                park("")
                if 5 not in kernel.online_cpus():
                    kernel.set_online(5, True)
                result[key] = case(tasks)
                result.setdefault(f"{key}_ran_on", []).append(result[key].get("ran_on"))
                if result[key].get("ran_on") == 1:
                    break
    finally:
        stop_dl_tasks(tasks, runtime)
        park("")
        if 5 not in kernel.online_cpus():
            kernel.set_online(5, True)
    result["admission_restored"] = kernel.read(RT_RUNTIME).strip() == runtime
    return print_result(result)


def hog_cpus(hogs):
    """{CPU: how many of the hogs are on it}."""
    out = {}
    for h in hogs:
        c = kernel.task_cpu(h.pid)
        out[c] = out.get(c, 0) + 1
    return out


def cmd_localpull(args):
    park_cpus = set(parse_cpulist(args.park))
    start_cpus, widen = parse_cpulist(args.start), parse_cpulist(args.widen)
    pulled_into = set(widen) - set(start_cpus)
    # The probe itself stays on the start CPUs, out of the way of the idle ones.
    os.sched_setaffinity(0, set(start_cpus))
    result = {}
    hogs = []
    try:
        result["park_errno"], _ = park(args.park)
        pinned = start_running(["taskset", "-c", str(args.pinned)])
        hogs = [start_running(["taskset", "-c", args.start]) for _ in range(args.hogs)]
        result["before"] = hog_cpus(hogs)
        for h in hogs:
            os.sched_setaffinity(h.pid, set(widen))
        # Only load balancing moves a busy loop: the idle CPUs must pull.
        t0 = time.monotonic()
        result["pulled"] = until(lambda: bool(set(hog_cpus(hogs)) & pulled_into),
                                 tries=args.seconds * 100)
        result["pull_s"] = round(time.monotonic() - t0, 3)
        result["after"] = hog_cpus(hogs)
        result["pinned_cpu"] = kernel.task_cpu(pinned.pid)
        result["parked_ran_hogs"] = bool(set(hog_cpus(hogs)) & park_cpus)
        hogs.append(pinned)
    finally:
        stop_hogs(hogs)
        park("")
    return print_result(result)


# A deadline task that sleeps: its bandwidth is admitted all the same.
DL_IDLE = ["sleep", "1000"]


def dl_params(args):
    return ["--sched-runtime", str(args.runtime_us * 1000),
            "--sched-deadline", str(args.period_us * 1000),
            "--sched-period", str(args.period_us * 1000)]


def start_dl_sleeper(args, cgroup: str | None = None):
    """A SCHED_DEADLINE sleeper, or None when admission control refused it.
    cgroup: a cgroup v2 group it joins before it asks for SCHED_DEADLINE
    (so that the group's root domain admits it)."""
    proc = subprocess.Popen(["chrt", "-d", *dl_params(args), "0", *DL_IDLE],
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=kernel.joins_cgroup(cgroup))
    if until(lambda: proc.poll() is not None or
             os.sched_getscheduler(proc.pid) == SCHED_DEADLINE, tries=1000) and \
            proc.poll() is None:
        return proc
    proc.wait()
    return None


def dl_total_bw(cpu: int = 0) -> int | None:
    """The admitted deadline bandwidth of cpu's root domain (<< 20 per
    CPU), from its dl_rq block in the scheduler's debugfs file."""
    m = re.search(rf"^dl_rq\[{cpu}\]:.*?^\s+\.dl_bw->total_bw\s*: (\d+)",
                  kernel.read(kernel.SCHED_DEBUG), re.M | re.S)
    return int(m[1]) if m else None


def cmd_dlbw(args):
    result = {"tasks": args.tasks, "bw_per_task": args.runtime_us / args.period_us}
    tasks = []
    rt_runtime_before = kernel.read(RT_RUNTIME).strip() if args.unpark_to is not None else None
    try:
        for _ in range(args.tasks):
            t = start_dl_sleeper(args)
            if t is None:
                raise RuntimeError("a deadline task was refused before any parking")
            tasks.append(t)
        result["total_bw"] = dl_total_bw()
        result["park_errno"], _ = park(args.park)
        result["parked_after"] = kernel.parked()
        if not result["park_errno"]:
            extra = start_dl_sleeper(args)
            result["extra_admitted"] = extra is not None
            if extra:
                tasks.append(extra)
        # Only where admission held: an extra task admitted would spoil
        # the premise (the test of admission reports that one).
        if args.unpark_to is not None and result.get("extra_admitted") is False:
            result["short"] = unpark_while_short(args)
    finally:
        stop_hogs(tasks)
        park("")
        if rt_runtime_before is not None:
            try:
                kernel.write(RT_RUNTIME, rt_runtime_before)
            except OSError as e:
                result["rt_restore_errno"] = e.errno
    return print_result(result)


def unpark_while_short(args):
    """With args.park parked, leave its root domain short of unparked
    capacity (a lower sched_rt_runtime_us); then unpark some, and park
    them again. What each write returned and left parked."""
    if not set(parse_cpulist(args.unpark_to)) < set(parse_cpulist(args.park)):
        raise ValueError("--unpark-to must be a proper subset of --park")
    try:
        kernel.write(RT_RUNTIME, str(args.lower_rt_us))
    except OSError as e:
        return {"lower_errno": e.errno}
    out = {"rt_runtime_us": int(kernel.read(RT_RUNTIME)), "total_bw": dl_total_bw()}
    out["unpark_errno"], _ = park(args.unpark_to)
    out["parked_after_unpark"] = kernel.parked()
    out["repark_errno"], _ = park(args.park)
    out["parked_after_repark"] = kernel.parked()
    return out


def cmd_election(args):
    # Anything that runs on the parked CPU's sibling and then sleeps makes
    # it newly idle, and newidle balance pulls without an election: keep
    # this probe off it.
    os.sched_setaffinity(0, set(parse_cpulist(args.start)))
    for f in args.feature:
        kernel.set_feature(f)
    err, _ = park(args.park)
    result = {"park_errno": err, "parked": kernel.parked(), "features": kernel.features()}
    widen = set(parse_cpulist(args.widen))
    hogs = start_hogs(args.start, args.hogs)
    seen = set()
    try:
        pids = [h.pid for h in hogs]
        for pid in pids:
            os.sched_setaffinity(pid, widen)

        def spread():
            seen.update(kernel.task_cpu(pid) for pid in pids)
            return widen <= seen
        # Bounded: a balancer that works spreads them within a few of its
        # intervals; the old election never did.
        result["spread"] = until(spread, tries=500)
    finally:
        stop_hogs(hogs)
        park("")
    result["seen"] = sorted(seen)
    return print_result(result)


PR_SCHED_CORE = 62
PR_SCHED_CORE_GET, PR_SCHED_CORE_CREATE, PR_SCHED_CORE_SHARE_FROM = 0, 1, 3
PIDTYPE_PID, PIDTYPE_TGID = 0, 1


def prctl_core(cmd, pid, pidtype, arg=0):
    """prctl(PR_SCHED_CORE, cmd, pid, pidtype, arg); OSError on failure.
    Every argument goes as a full unsigned long (the kernel refuses a
    non-zero arg for all but PR_SCHED_CORE_GET, whose arg is a pointer)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if isinstance(arg, int):
        arg = ctypes.c_ulong(arg)
    if libc.prctl(PR_SCHED_CORE, ctypes.c_ulong(cmd), ctypes.c_ulong(pid),
                  ctypes.c_ulong(pidtype), arg) != 0:
        raise OSError(ctypes.get_errno(), f"prctl(PR_SCHED_CORE, {cmd})")


def core_cookie_hogs(cpus, n):
    """n busy loops allowed on `cpus` that share one core-scheduling
    cookie: the first creates it, the others take it from the first
    (prctl in the child before exec; the cookie survives exec)."""
    first = subprocess.Popen(
        ["taskset", "-c", cpus, *BUSY_LOOP],
        preexec_fn=lambda: prctl_core(PR_SCHED_CORE_CREATE, 0, PIDTYPE_TGID))
    hogs = [first]
    for _ in range(n - 1):
        hogs.append(subprocess.Popen(
            ["taskset", "-c", cpus, *BUSY_LOOP],
            preexec_fn=lambda: prctl_core(PR_SCHED_CORE_SHARE_FROM, first.pid, PIDTYPE_PID)))
    want = set(parse_cpulist(cpus))
    until(lambda: all(os.sched_getaffinity(h.pid) == want for h in hogs), tries=1000)
    return hogs


def core_cookie(pid):
    """The task's core-scheduling cookie as prctl reports it (hashed), 0
    for none."""
    cookie = ctypes.c_ulong(0)
    prctl_core(PR_SCHED_CORE_GET, pid, PIDTYPE_PID, ctypes.byref(cookie))
    return cookie.value


def cmd_cookie(args):
    kernel.enable_schedstats()
    parked_cpus = set(parse_cpulist(args.park))
    err, _ = park(args.park)
    result = {"park_errno": err, "parked": kernel.parked()}
    hogs = start_hogs(args.park, 1)
    try:
        cookied = core_cookie_hogs(format_cpulist(kernel.online_cpus()), args.hogs)
        hogs += cookied
        pids = [h.pid for h in cookied]
        result["cookies"] = len({core_cookie(pid) for pid in pids} - {0})
        result["uncookied"] = core_cookie(hogs[0].pid) == 0
        result["settled"] = settle(pids, parked_cpus)
        (result["samples"], result["on_parked"],
         result["schedstat"]) = sample_parked(pids, parked_cpus, args.seconds)
    finally:
        stop_hogs(hogs)
        park("")
    return print_result(result)


def cmd_parkedonly(args):
    kernel.enable_schedstats()
    err, _ = park(args.park)
    cpus = parse_cpulist(args.park)
    result = {"park_errno": err, "parked": kernel.parked()}
    hogs = start_hogs(str(cpus[0]), args.hogs)
    seen = set()
    try:
        pids = [h.pid for h in hogs]
        # Widened while still starting (exec, page faults over the 9p
        # root), a hog wakes and is placed: that spreads them. Wait until
        # every one is a busy loop that never sleeps (0.2 s of CPU each).
        result["running"] = until(lambda: all(utime(pid) >= 50 for pid in pids), tries=1500)
        for pid in pids:
            os.sched_setaffinity(pid, set(cpus))

        def spread():
            seen.update(kernel.task_cpu(pid) for pid in pids)
            return set(cpus) <= seen
        # Bounded: once a push runs (at most 100 ms apart) it is done.
        result["spread"] = until(spread, tries=300)

        def balanced():
            where = [kernel.task_cpu(pid) for pid in pids]
            counts = [where.count(c) for c in cpus]
            return max(counts) - min(counts) <= 1
        result["balanced"] = until(balanced, tries=300)
        result["where"] = sorted(kernel.task_cpu(pid) for pid in pids)
        # Then they stay: with an odd count, a miscount would trade one
        # back and forth at every push.
        s0 = kernel.read_schedstat()
        moved = 0
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            now = sorted(kernel.task_cpu(pid) for pid in pids)
            moved += now != result["where"]
            time.sleep(0.01)        # the sampling interval
        result["samples_changed"] = moved
        result["schedstat"] = schedstat_delta(s0, kernel.read_schedstat())
        result["balanced_end"] = balanced()
    finally:
        stop_hogs(hogs)
        park("")
    result["seen"] = sorted(seen)
    return print_result(result)


def root_util(cpu):
    """The root cfs_rq's util_avg of a CPU from sched/debug; 0 when it is
    not listed (a fully decayed cfs_rq leaves the list)."""
    return kernel.root_cfs_rq_field(cpu, "util_avg") or 0


def cpu_irqs(cpu):
    """The CPU's column of /proc/interrupts for the local timer and the
    IPIs that wake an idle CPU."""
    rows, cols = proc_table(kernel.read("/proc/interrupts"))
    col = cols.index(cpu)
    return {row: rows[row][col] for row in ("LOC", "RES", "CAL") if row in rows}


def blocked_decay(cpu, others, parked, seconds):
    """Build up a hog's utilization on `cpu`, keep the other CPUs busy,
    stop the hog (park `cpu` if asked); how long the blocked utilization
    takes to decay."""
    result = {}
    hog = start_hogs(str(cpu), 1)
    hogs = []
    try:
        result["built_up"] = until(lambda: root_util(cpu) >= 600, tries=500)
        # Every other CPU busy: no unparked CPU goes idle, so none takes
        # the NOHZ idle balance.
        hogs = [h for c in others for h in start_hogs(str(c), 1)]
        # Stopped, the hog sleeps: its utilization stays on the CPU as
        # blocked load (a task that exits takes its own away).
        os.kill(hog[0].pid, signal.SIGSTOP)
        result["stopped"] = until(lambda: kernel.task_state(hog[0].pid) == "T", tries=500)
        if parked:
            result["park_errno"], _ = park(str(cpu))
        t0 = time.monotonic()
        i0 = cpu_irqs(cpu)
        result["util_start"] = root_util(cpu)
        # Bounded: PELT halves it every 32 ms once anybody updates it.
        result["decayed"] = until(lambda: root_util(cpu) < 50, tries=int(seconds * 100))
        result["decay_ms"] = round((time.monotonic() - t0) * 1000)
        result["util_end"] = root_util(cpu)
        result["irqs"] = {k: v - i0[k] for k, v in cpu_irqs(cpu).items()}
    finally:
        os.kill(hog[0].pid, signal.SIGCONT)
        stop_hogs(hog + hogs)
        park("")
    return result


def cmd_blocked(args):
    kernel.ensure_debugfs()
    cpu = int(args.park)
    others = [c for c in kernel.online_cpus() if c != cpu]
    # Off that CPU, or the probe's own polling would keep it busy.
    os.sched_setaffinity(0, set(others))
    return print_result({"unparked": blocked_decay(cpu, others, False, args.seconds),
                         "parked": blocked_decay(cpu, others, True, args.seconds)})

NUMA_SYSCTL = "/proc/sys/kernel/numa_balancing"
NUMA_TOUCHER = ("import sys\nb = bytearray(64 << 20)\nprint('filled', flush=True)\n"
                "while True:\n    for i in range(0, len(b), 4096):\n        b[i] ^= 1\n")


def task_sched(pid, name):
    """A number from /proc/PID/sched (its NUMA fields among them)."""
    for line in kernel.read(f"/proc/{pid}/sched").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return int(float(value))
    return None


def cmd_numa(args):
    kernel.enable_schedstats()
    kernel.ensure_debugfs()
    parked_cpus = set(parse_cpulist(args.park))
    old = kernel.read(NUMA_SYSCTL).strip()
    knobs = f"{kernel.DEBUGFS}/sched/numa_balancing"
    saved = {k: kernel.read(f"{knobs}/{k}").strip()
             for k in ("scan_delay_ms", "scan_period_min_ms")}
    result = {}
    # Memory first touched on the parked node: the task's faults say
    # node 1, so NUMA balancing wants it there.
    toucher = subprocess.Popen(["taskset", "-c", args.park, "python3", "-c", NUMA_TOUCHER],
                               stdout=subprocess.PIPE, text=True)
    try:
        result["filled"] = toucher.stdout.readline().strip() == "filled"
        kernel.write(NUMA_SYSCTL, "1")
        for k in saved:
            kernel.write(f"{knobs}/{k}", "100")
        os.sched_setaffinity(toucher.pid, set(kernel.online_cpus()))
        err, _ = park(args.park)
        result["park_errno"] = err
        result["left"] = settle([toucher.pid], parked_cpus)
        q0 = task_sched(toucher.pid, "mm->numa_scan_seq")
        (result["samples"], result["on_parked"],
         result["schedstat"]) = sample_parked([toucher.pid], parked_cpus, args.seconds)
        # NUMA balancing ran: its scans of the task's memory went on.
        result["scans"] = task_sched(toucher.pid, "mm->numa_scan_seq") - q0
        result["preferred_nid"] = task_sched(toucher.pid, "numa_preferred_nid")
    finally:
        toucher.kill()
        toucher.wait()
        park("")
        kernel.write(NUMA_SYSCTL, old)
        for k, v in saved.items():
            kernel.write(f"{knobs}/{k}", v)
    return print_result(result)


def cmd_landing(args):
    kernel.enable_schedstats()
    result = {}
    hogs = []
    try:
        # Affinity changes.
        hog, = start_hogs(str(args.cpu), 1)
        hogs.append(hog)
        err, _ = park(args.park)
        result["park_errno"] = err
        widen, back = set(parse_cpulist(args.widen)), {args.cpu}
        # The affinity change picks cpumask_any_and_distribute(), which
        # goes on from the last CPU it gave on the calling CPU: calling
        # from one CPU, the move back to --cpu makes the next pick the
        # first CPU of --widen after --cpu every round.
        os.sched_setaffinity(0, {args.probe_cpu})
        cpus = []
        for _ in range(args.rounds):
            os.sched_setaffinity(hog.pid, widen)
            until(lambda: kernel.task_cpu(hog.pid) != args.cpu, tries=100)
            cpus.append(kernel.task_cpu(hog.pid))
            os.sched_setaffinity(hog.pid, back)
        os.sched_setaffinity(0, set(kernel.online_cpus()))
        result["affinity"] = {"parked": kernel.parked(), "cpus": cpus,
                              "moves": task_sched(hog.pid, NON_PREFERRED)}
        stop_hogs(hogs)
        hogs = []
        # A CPU going offline, --rounds times.
        err, _ = park(args.fallback_park)
        result["fallback_park_errno"] = err
        hog, = start_hogs(str(args.fallback_cpu), 1)
        hogs.append(hog)
        fallback_parked = set(parse_cpulist(args.fallback_park))
        allowed = set(parse_cpulist(args.fallback_allowed))
        rounds = []
        for _ in range(args.fallback_rounds):
            os.sched_setaffinity(hog.pid, {args.fallback_cpu})
            until(lambda: kernel.task_cpu(hog.pid) == args.fallback_cpu, tries=200)
            os.sched_setaffinity(hog.pid, allowed)
            before = kernel.task_cpu(hog.pid)
            moves0 = task_sched(hog.pid, NON_PREFERRED)
            kernel.set_online(args.fallback_cpu, False)
            try:
                after = kernel.task_cpu(hog.pid)
                # Bounded: wait for the push, if it landed on a parked CPU.
                until(lambda: kernel.task_cpu(hog.pid) not in fallback_parked, tries=200)
                moves = task_sched(hog.pid, NON_PREFERRED)
            finally:
                kernel.set_online(args.fallback_cpu, True)
            rounds.append({"before": before, "after": after,
                           "moves": None if moves is None else moves - (moves0 or 0)})
        result["fallback"] = {"parked": kernel.parked(), "rounds": rounds}
    finally:
        stop_hogs(hogs)
        park("")
    return print_result(result)


def fork_spinners(n):
    """n processes forked from this one (they inherit its affinity), without
    an exec each, that wait for the returned pipe end to be closed and then
    spin until killed: (pids, that end). Waiting, they leave the CPU to the
    parent while it forks the rest."""
    r, w = os.pipe()
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os.close(w)
            os.read(r, 1)   # end of file: released
            while True:
                pass
        pids.append(pid)
    os.close(r)
    return pids, w


def stopper_runs(events, cpu):
    """Seconds each run of `cpu`'s stopper thread lasted."""
    runs, start = [], None
    name = f"migration/{cpu}"
    for ts, c, kind, data in events:
        if c != cpu or kind != "switch":
            continue
        prev, nxt = data
        if prev == name and start is not None:
            runs.append(ts - start)
            start = None
        if nxt == name:
            start = ts
    return runs


def cmd_pushscan(args):
    kernel.enable_schedstats()
    cpu, everything = args.cpu, os.sched_getaffinity(0)
    pids = []
    result = {"cpu": cpu, "stuck": args.stuck, "movable": args.movable}
    # The movable ones are widened together through a cpuset, one write
    # right before the park: the balancer has no time to pull them first.
    group = kernel.cgroup_group("pushscan", "cpuset")
    try:
        kernel.write(f"{group}/cpuset.cpus", str(cpu))
        # Forked here, they are allowed on cpu only.
        os.sched_setaffinity(0, {cpu})
        pids, release = fork_spinners(args.stuck + args.movable)
        os.sched_setaffinity(0, everything - {cpu})
        stuck, movable = pids[:args.stuck], pids[args.stuck:]
        for pid in movable:
            kernel.write(f"{group}/cgroup.procs", str(pid))
        for pid in movable:
            os.sched_setaffinity(pid, everything)     # the cpuset still says cpu
        os.close(release)
        until(lambda: all(kernel.task_cpu(p) == cpu for p in pids), tries=1000)
        result["started_on_cpu"] = sum(kernel.task_cpu(p) == cpu for p in pids)
        trace.start(["sched/sched_switch"], 8192)
        s0 = kernel.read_schedstat()
        kernel.write(f"{group}/cpuset.cpus", format_cpulist(sorted(everything)))
        err, ns = park(str(cpu))
        result["park_errno"], result["park_ns"] = err, ns
        until(lambda: not any(kernel.task_cpu(p) == cpu for p in movable), tries=1000)
        # The push's last walk reports the pinned ones it passes; it may
        # still be running when the last movable task has left.
        until(lambda: schedstat_delta(s0, kernel.read_schedstat())[cpu]["park_pinned"]
              >= args.stuck, tries=200)
        text, result["trace_lost"] = trace.stop()
        s1 = kernel.read_schedstat()
        result["movable_left_on_cpu"] = sum(kernel.task_cpu(p) == cpu for p in movable)
        result["stuck_on_cpu"] = sum(kernel.task_cpu(p) == cpu for p in stuck)
        # Upstream's per-task count of moves off a non-preferred CPU.
        result["movable_counted"] = sum((task_sched(p, NON_PREFERRED) or 0) >= 1
                                        for p in movable)
        result["stuck_counted"] = sum((task_sched(p, NON_PREFERRED) or 0) >= 1
                                      for p in stuck)
        runs = stopper_runs(parse_events(text), cpu)
        result["stopper_runs"] = len(runs)
        result["stopper_ms_total"] = round(sum(runs) * 1e3, 3)
        result["stopper_ms_max"] = round(max(runs, default=0) * 1e3, 3)
        result["schedstat"] = schedstat_delta(s0, s1)[cpu]
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        for pid in pids:
            os.waitpid(pid, 0)
        park("")
        os.rmdir(group)
    return print_result(result)


def cmd_hotplug(args):
    cpus = parse_cpulist(args.cpus)
    hog = subprocess.Popen(["stress-ng", "--cpu", str(args.hog), "--quiet"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    result = {"offline_ns": [], "online_ns": []}
    try:
        for _ in range(args.repeat):
            for on, key in ((False, "offline_ns"), (True, "online_ns")):
                t0 = time.perf_counter_ns()
                for c in cpus:
                    kernel.set_online(c, on)
                result[key].append(time.perf_counter_ns() - t0)
    finally:
        hog.kill()
        hog.wait()
    return print_result(result)

# seccomp user notification, x86_64 (linux/seccomp.h, linux/filter.h).
NR_SECCOMP = 317
NR_GETPPID = 110                    # the call the filter hands to the supervisor
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
SECCOMP_RET_USER_NOTIF = 0x7fc00000
SECCOMP_RET_ALLOW = 0x7fff0000
PR_SET_NO_NEW_PRIVS = 38
NOTIF_SIZE, RESP_SIZE = 80, 24      # struct seccomp_notif, seccomp_notif_resp


def _ioc(direction, nr, size):
    return (direction << 30) | (size << 16) | (ord("!") << 8) | nr


NOTIF_RECV = _ioc(3, 0, NOTIF_SIZE)
NOTIF_SEND = _ioc(3, 1, RESP_SIZE)
NOTIF_SET_FLAGS = _ioc(1, 4, 8)
SYNC_WAKE_UP = 1                    # SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
NOTIFY_REPLY = 4242                 # what the trapped getppid() returns


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte),
                ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def install_listener(libc):
    """A filter on the calling thread that sends getppid() to a listener;
    the listener's fd."""
    prog = (SockFilter * 4)(
        SockFilter(0x20, 0, 0, 0),                      # A = seccomp_data.nr
        SockFilter(0x15, 0, 1, NR_GETPPID),             # A == getppid?
        SockFilter(0x06, 0, 0, SECCOMP_RET_USER_NOTIF),
        SockFilter(0x06, 0, 0, SECCOMP_RET_ALLOW))
    fprog = SockFprog(len(prog), prog)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    fd = libc.syscall(NR_SECCOMP, SECCOMP_SET_MODE_FILTER,
                      SECCOMP_FILTER_FLAG_NEW_LISTENER, ctypes.byref(fprog))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER)")
    return fd


def cmd_notify(args):
    kernel.enable_schedstats()
    libc = ctypes.CDLL(None, use_errno=True)
    cpu = args.cpu
    result = {"cpu": cpu, "parked": args.park}
    box, installed, go = {}, threading.Event(), threading.Event()

    def notifier():
        try:
            os.sched_setaffinity(0, {cpu})      # this thread only
            box["fd"] = install_listener(libc)
        except OSError as e:
            box["error"] = str(e)
        installed.set()
        if "fd" in box:
            go.wait()
            box["replies"] = [libc.syscall(NR_GETPPID) for _ in range(args.rounds)]

    t = threading.Thread(target=notifier)
    t.start()
    installed.wait()
    if "error" in box:
        t.join()
        raise RuntimeError(box["error"])
    fd = box["fd"]
    result["sync_flag_errno"] = 0
    if libc.ioctl(fd, NOTIF_SET_FLAGS, ctypes.c_ulong(SYNC_WAKE_UP)) != 0:
        result["sync_flag_errno"] = ctypes.get_errno()
    s0 = kernel.read_schedstat()
    result["park_errno"] = park(args.park)[0] if args.park else 0
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    cpus = []
    try:
        go.set()
        for _ in range(args.rounds):
            poller.poll()
            cpus.append(libc.sched_getcpu())
            notif = ctypes.create_string_buffer(NOTIF_SIZE)
            if libc.ioctl(fd, NOTIF_RECV, notif) != 0:
                raise OSError(ctypes.get_errno(), "SECCOMP_IOCTL_NOTIF_RECV")
            resp = ctypes.create_string_buffer(RESP_SIZE)
            resp[0:8] = notif[0:8]                      # the id
            resp[8:16] = NOTIFY_REPLY.to_bytes(8, "little")
            if libc.ioctl(fd, NOTIF_SEND, resp) != 0:
                raise OSError(ctypes.get_errno(), "SECCOMP_IOCTL_NOTIF_SEND")
        t.join()
    finally:
        if args.park:
            park("")
        os.close(fd)
    result["schedstat"] = schedstat_delta(s0, kernel.read_schedstat())[cpu]
    result["replies_ok"] = box.get("replies") == [NOTIFY_REPLY] * args.rounds
    result["rounds"] = len(cpus)
    result["on_notifier_cpu"] = cpus.count(cpu)
    result["cpus_seen"] = sorted(set(cpus))
    return print_result(result)


# --- parked CPUs go quiet ----------------------------------------------------

def proc_table(text):
    """/proc/interrupts or /proc/softirqs -> ({row: [count per CPU column]},
    the CPU numbers of the columns). A row's trailing text (chip, name) is
    dropped; rows with fewer numbers (ERR, MIS) count for no CPU."""
    lines = text.splitlines()
    cols = [int(c[3:]) for c in lines[0].split()]
    rows = {}
    for line in lines[1:]:
        name, _, rest = line.partition(":")
        vals = []
        for tok in rest.split()[:len(cols)]:
            if not tok.isdigit():
                break
            vals.append(int(tok))
        if len(vals) == len(cols):
            rows[name.strip()] = vals
    return rows, cols


def irq_names(text):
    """{numbered row: its device name} from /proc/interrupts."""
    names = {}
    ncols = len(text.splitlines()[0].split())
    for line in text.splitlines()[1:]:
        name, _, rest = line.partition(":")
        if name.strip().isdigit():
            names[name.strip()] = " ".join(rest.split()[ncols:])
    return names


def quiet_counts(before, after, cpus):
    """What landed on `cpus` between two snapshots of (interrupts,
    softirqs, schedstat text): device interrupts by row, the named rows
    (LOC, RES, CAL, ...), softirqs, schedule() calls and task run time."""
    out = {}
    for key in ("interrupts", "softirqs"):
        (b, cols), (a, _) = proc_table(before[key]), proc_table(after[key])
        idx = [cols.index(c) for c in cpus if c in cols]
        delta = {row: sum(a[row][i] - b[row][i] for i in idx) for row in a if row in b}
        out[key] = {k: v for k, v in delta.items() if v}
        if key == "interrupts":
            out["irqs_per_cpu"] = {cols[i]: sum(a[row][i] - b[row][i] for row in a if row in b)
                                   for i in idx}
    irqs = out["interrupts"]
    out["device_irqs"] = sum(v for k, v in irqs.items() if k.isdigit())
    out["total_irqs"] = sum(irqs.values())
    sb, sa = (schedstat.parse_schedstat(x) for x in (before["schedstat"], after["schedstat"]))
    out["sched_count"] = sum(sa.cpus[c].fields["sched_count"] - sb.cpus[c].fields["sched_count"]
                             for c in cpus if c in sa.cpus and c in sb.cpus)
    out["task_ms"] = round(sum(sa.cpus[c].fields["rq_cpu_time"] - sb.cpus[c].fields["rq_cpu_time"]
                               for c in cpus if c in sa.cpus and c in sb.cpus) / 1e6, 1)
    return out


def quiet_snapshot():
    return {"interrupts": kernel.read("/proc/interrupts"),
            "softirqs": kernel.read("/proc/softirqs"),
            "schedstat": kernel.read_schedstat()}


READER = ["python3", "-c", """
import os, sys, time
files = []
for root, dirs, names in os.walk(os.path.dirname(os.__file__)):
    files += [os.path.join(root, n) for n in names if n.endswith('.py')]
print('running', flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    for f in files[:400]:
        with open(f, 'rb') as fh:
            fh.read()
    with open('/proc/sys/vm/drop_caches', 'w') as fh:
        fh.write('3')
"""]


def quiet_phase(seconds, hogs):
    """The load: `hogs` busy loops and a reader of the 9p root (file
    reads, each pass's page cache dropped: every pass goes to the host),
    for `seconds`; the counters around it."""
    loops = [start_running([]) for _ in range(hogs)]
    try:
        reader = subprocess.Popen([*READER, str(seconds)], stdout=subprocess.PIPE, text=True)
        if reader.stdout.readline() != "running\n":
            raise RuntimeError("the file reader did not start")
        before = quiet_snapshot()
        reader.wait()
        after = quiet_snapshot()
    finally:
        stop_hogs(loops)
    return before, after


def cmd_quiet(args):
    from . import irq_preferred
    kernel.enable_schedstats()
    cpus = parse_cpulist(args.cpus)
    result = {"cpus": args.cpus, "seconds": args.seconds, "hogs": args.hogs,
              "irq_names": irq_names(kernel.read("/proc/interrupts"))}
    agent = irq_preferred.Agent()
    for phase in args.phases.split(","):
        kernel.cpu_mode("offline" if phase == "offline" else
                        "park" if phase in ("parked", "agent") else "all", args.cpus)
        row = {"preferred": kernel.preferred()}
        if phase == "agent":
            row["agent"] = agent.apply()
        b, a = quiet_phase(args.seconds, args.hogs)
        row.update(quiet_counts(b, a, cpus))
        if phase == "agent":
            row["agent_back"] = (kernel.set_parked(""), agent.apply())[1]
        result[phase] = row
    kernel.cpu_mode("all")
    return print_result(result)


def main(argv=None):
    p = argparse.ArgumentParser(prog="park_probe.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    e = sub.add_parser("evacuate")
    e.add_argument("--park", required=True)
    e.add_argument("--hog", type=int, default=8)
    e.add_argument("--rt", action="store_true")
    e.add_argument("--loops", type=int, default=50)
    e.add_argument("--feature", action="append", default=[])
    e.add_argument("--keep-trace", metavar="FILE", help="write the raw trace there")
    sub.add_parser("badinput")
    ps = sub.add_parser("pushscan")
    ps.add_argument("--cpu", type=int, default=7)
    # 200 + 200 spinners starve the probe itself on overcommit8 under TCG.
    ps.add_argument("--stuck", type=int, default=100)
    ps.add_argument("--movable", type=int, default=100)
    la = sub.add_parser("landing")
    la.add_argument("--cpu", type=int, default=0)
    la.add_argument("--park", default="1-3")
    la.add_argument("--widen", default="1-7")
    la.add_argument("--probe-cpu", type=int, default=7)
    la.add_argument("--rounds", type=int, default=20)
    la.add_argument("--fallback-cpu", type=int, default=5)
    la.add_argument("--fallback-park", default="1-3")
    la.add_argument("--fallback-allowed", default="1,5,6")
    la.add_argument("--fallback-rounds", type=int, default=5)
    n = sub.add_parser("pinned")
    n.add_argument("--cpu", type=int, default=6)
    n.add_argument("--park", default="4-7")
    n.add_argument("--mover", type=int, default=7)
    n.add_argument("--loops", type=int, default=100)
    pe = sub.add_parser("pinnedeach")
    pe.add_argument("--cpus", default="4-7")
    pe.add_argument("--rounds", type=int, default=1)
    pe.add_argument("--gap", type=float, default=0.0)
    g = sub.add_parser("pingpong")
    g.add_argument("--park", default="5")
    g.add_argument("--cpus", default="0,5")
    g.add_argument("--hogs", type=int, default=4)
    g.add_argument("--seconds", type=float, default=5)
    sub.add_parser("rt")
    d = sub.add_parser("dl")
    d.add_argument("--busy-cpu", type=int, default=3)
    d.add_argument("--sleeper-cpu", type=int, default=2)
    sub.add_parser("dlmixed")
    el = sub.add_parser("election")
    el.add_argument("--park", default="2")
    el.add_argument("--start", default="0")
    el.add_argument("--widen", default="0,1,3")
    el.add_argument("--hogs", type=int, default=4)
    el.add_argument("--feature", action="append", default=[])
    ck = sub.add_parser("cookie")
    ck.add_argument("--park", default="1")
    ck.add_argument("--hogs", type=int, default=4)
    ck.add_argument("--seconds", type=float, default=3)
    po = sub.add_parser("parkedonly")
    po.add_argument("--park", default="2-3")
    po.add_argument("--hogs", type=int, default=3)
    po.add_argument("--seconds", type=float, default=2)
    nt = sub.add_parser("notify")
    nt.add_argument("--cpu", type=int, default=3)
    nt.add_argument("--park", default="", help="the CPUs to park (none: the control)")
    nt.add_argument("--rounds", type=int, default=200)
    bl = sub.add_parser("blocked")
    bl.add_argument("--park", default="3")
    bl.add_argument("--seconds", type=float, default=2)
    nu = sub.add_parser("numa")
    nu.add_argument("--park", default="4-7")
    nu.add_argument("--seconds", type=float, default=6)
    lp = sub.add_parser("localpull")
    lp.add_argument("--park", required=True)
    lp.add_argument("--pinned", type=int, required=True)
    lp.add_argument("--start", required=True)
    lp.add_argument("--widen", required=True)
    lp.add_argument("--hogs", type=int, default=6)
    lp.add_argument("--seconds", type=int, default=10)
    db = sub.add_parser("dlbw")
    db.add_argument("--park", required=True)
    db.add_argument("--tasks", type=int, required=True)
    db.add_argument("--runtime-us", type=int, default=5000)
    db.add_argument("--period-us", type=int, default=10000)
    db.add_argument("--lower-rt-us", type=int, default=200000)
    db.add_argument("--unpark-to", help="after the park, unpark to this subset of it")
    h = sub.add_parser("hotplug")
    h.add_argument("--cpus", default="2-7")
    h.add_argument("--hog", type=int, default=2)
    h.add_argument("--repeat", type=int, default=3)
    sub.add_parser("stopself", help="park the CPU stopped midway offline (boot with "
                   "isolcpus=domain,N for a default root domain with an active CPU)")
    q = sub.add_parser("quiet")
    q.add_argument("--cpus", default="2-7")
    q.add_argument("--seconds", type=float, default=10)
    q.add_argument("--hogs", type=int, default=2)
    q.add_argument("--phases", default="preferred,parked,agent,offline")
    args = p.parse_args(argv)
    return {"quiet": cmd_quiet, "evacuate": cmd_evacuate, "badinput": cmd_badinput,
            "pinned": cmd_pinned, "pinnedeach": cmd_pinnedeach, "landing": cmd_landing,
            "pushscan": cmd_pushscan, "pingpong": cmd_pingpong,
            "rt": cmd_rt, "dl": cmd_dl, "dlmixed": cmd_dlmixed, "election": cmd_election, "hotplug": cmd_hotplug,
            "localpull": cmd_localpull, "dlbw": cmd_dlbw,
            "cookie": cmd_cookie, "parkedonly": cmd_parkedonly, "blocked": cmd_blocked,
            "notify": cmd_notify, "numa": cmd_numa, "stopself": cmd_stopself}[args.action](args)
