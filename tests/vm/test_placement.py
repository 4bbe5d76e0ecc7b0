"""The two merged changes the series builds on (seeds 001 and 003), shown
working on the patched 6.12 kernel: select_idle_sibling()'s
recent_used_cpu and the small NUMA imbalance allowance; and the series'
own wakeup search over the LLC's set of idle CPUs (SIS_SPARSE), in the
same smt4 boot. One boot each."""
import pytest

from conftest import boot, has_topic, json_results

# The smt4 probes, each run only when the kernels have the topics it needs
# (make test-topics); with the whole series all four run.
SMT4_PROBES = (
    ("recent", "recent-used --rounds 5", ()),
    ("recent_parked", "recent-used --rounds 5 --park", ("park",)),
    ("idle_set", "idle-set --rounds 5", ("sis",)),
    ("idle_set_parked", "idle-set --rounds 5 --park", ("sis", "park", "parksis")),
)


@pytest.fixture(scope="module")
def smt4_placement(test_kernel):
    """smt4 (cores 0-1 and 2-3): the recent_used_cpu probe, then the same
    with the recent CPU parked; the idle-set probe, then the same with the
    idle CPU parked."""
    probes = [(name, cmd) for name, cmd, topics in SMT4_PROBES
              if all(has_topic(t) for t in topics)]
    res = boot(test_kernel, "smt4",
               " && ".join(f"python3 guest/placement_probe.py {cmd}" for _, cmd in probes))
    return dict(zip((name for name, _ in probes), json_results(res, len(probes))))


def setup_held(r, prev):
    """The round built the state it needs: the task slept on the recent
    CPU, then woke on prev (a busy recent CPU, the waker's not allowed;
    the probe wakes it up to SETUP_TRIES times until it gets there)."""
    return r["asleep_on_recent"] and r["first_cpu"] == prev and r["asleep_on_prev"]


def test_recent_used_cpu_takes_the_idle_cpu_a_task_used_before(smt4_placement):
    """A sleeping task whose previous CPU (2) is busy and whose CPU before
    that (1) is idle, woken from CPU 0: select_idle_sibling() returns the
    recently used CPU, counted as recent_used_hit.

    At least 4 of 5 rounds: a kworker that happens to run on CPU 1 at the
    wakeup makes it busy, and the task then rightly goes elsewhere. A
    kernel without the shortcut puts it on the idle core (CPU 3) every time."""
    got = smt4_placement["recent"]
    rounds = got["rounds"]
    assert len(rounds) == 5
    for r in rounds:
        assert setup_held(r, got["prev"]), r
    hits = [r for r in rounds if r["cpu"] == got["recent"]]
    assert len(hits) >= 4, rounds
    for r in hits:
        assert r["recent_used_hit"] >= 1, r


@pytest.mark.topics("park")
def test_parked_recent_used_cpu_is_not_taken(smt4_placement):
    """The same state with CPU 1 parked before the wakeup: the shortcut
    must not return it (a miss), nor may any later search."""
    got = smt4_placement["recent_parked"]
    for r in got["rounds"]:
        assert setup_held(r, got["prev"]), r
        assert r["park_errno"] == 0
        assert r["cpu"] != got["recent"], r
        assert r["recent_used_miss"] >= 1, r


@pytest.mark.topics("sis")
def test_idle_set_follows_the_idle_class_and_the_switch(smt4_placement):
    """SIS_SPARSE's set: CPU 3 (the others run pinned loops) leaves the set
    when it stops being idle with the feature off, and enters it as soon
    as the feature is switched on, although it stays in the idle loop and
    never passes through the idle class (sis_idle_seed()). Without the
    seeding CPU 3 would be out until something ran there.

    At least 4 of 5 rounds for the switch: a kworker running on CPU 3 at
    that instant rightly keeps it out until it goes idle again."""
    got = smt4_placement["idle_set"]
    rounds = got["rounds"]
    assert got["llc"] == [0, 1, 2, 3] and len(rounds) == 5
    assert all(r["sis_idle_off"] == 0 for r in rounds), rounds
    assert sum(r["sis_idle_on"] == 1 for r in rounds) >= 4, rounds


@pytest.mark.topics("sis")
def test_wakeup_search_finds_the_idle_cpu_in_the_set(smt4_placement):
    """A task that last ran on busy CPU 1, woken from busy CPU 0, with
    CPU 3 the only idle CPU: the search over the set must return CPU 3,
    counted as a search's find, not as target/prev/recent. A kernel that
    leaves the set empty (no update, no seeding) sends it to the busy
    target every time. SIS_UTIL is off for the rounds: with 3 of 4 CPUs
    busy its overloaded exit stops both searches once the loops'
    utilisation has ramped up (seen: 3 of 5 rounds found CPU 3). The
    wakee must be off CPU 1's runqueue before the wakeup (wchan, not just
    state S): one preempted on its way to sleep, or kept queued by delayed
    dequeue, is requeued on CPU 1 with no search (seen: 1 round in 30).

    At least 4 of 5 rounds, as above."""
    got = smt4_placement["idle_set"]
    rounds = got["rounds"]
    for r in rounds:
        assert r["asleep_on_prev"], r
    # The search's find, not the load balancer pulling the task later.
    found = [r for r in rounds if r["cpu"] == got["idle"]
             and r["found_idle_cpu"] + r["found_idle_core"] >= 1]
    assert len(found) >= 4, rounds


@pytest.mark.topics("sis", "park", "parksis")
def test_parked_cpu_stays_out_of_the_idle_set(smt4_placement):
    """The same rounds with CPU 3 parked: it never enters the set, and the
    woken task never lands there. Unparked with SIS_SPARSE on, the idle
    CPU 3 is in the set at once (it would otherwise wait for something to
    run there). Read at a moment CPU 3 runs its idle task (the probe reads
    again while it runs something else)."""
    got = smt4_placement["idle_set_parked"]
    assert got["park"] and got["sis_idle_after_unpark"] == 1, \
        (got["sis_idle_after_unpark"], got["unpark_busy_reads"])
    for r in got["rounds"]:
        assert r["asleep_on_prev"], r
        assert r["sis_idle_off"] == 0 and r["sis_idle_on"] == 0, r
        assert r["cpu"] != got["idle"], r


@pytest.fixture(scope="module")
def numa2_allowance(test_kernel):
    """numa2 (nodes 0-3 and 4-7, one LLC each: imb_numa_nr is 2): a
    ping-pong pair, two busy loops, then four, each started on node 0 and
    then allowed everywhere, sampled for 3 s. The two-task cases get up to
    3 trials (see below); four tasks get one."""
    res = boot(test_kernel, "numa2",
               "for t in pair 2; do python3 guest/placement_probe.py numa --tasks $t --trials 3"
               " || exit 1; done; python3 guest/placement_probe.py numa --tasks 4")
    return dict(zip(("pair", "2", "4"), json_results(res, 3)))


@pytest.mark.parametrize("tasks", ["pair", "2"])
def test_numa_allowance_keeps_two_tasks_on_their_node(numa2_allowance, tasks):
    """Two running tasks on a node whose other node is idle: the imbalance
    (idle CPUs 4 against 2) is within the allowance, so neither the load
    balancer nor a wakeup takes either of them to node 1.

    The allowance is a difference of 2 running tasks (NUMA_IMBALANCE_MIN):
    a third task that runs on node 0 for a moment (a kworker) while node
    1 balances lets one task go, and it stays. That was seen in about one
    run in a dozen, late (62 of 600 samples) and once early (CI, 486 of
    600). So a trial that loses a task is run again with fresh tasks, up
    to 3 trials, and one must keep both home: fewer than a quarter of the
    samples on node 1, never both there. Without the allowance every
    trial loses a task within a few samples (3 loops: 297 of 900), so
    this still fails such a kernel."""
    got = numa2_allowance[tasks]
    assert 1 <= len(got["trials"]) <= 3, got
    for trial in got["trials"]:
        assert trial["started_home"], trial
        assert trial["samples"] == 2 * 300, trial
    kept = got["trials"][-1]
    assert kept["on_other"] < kept["samples"] // 4, got
    assert kept["most_on_other"] <= 1, got


def test_numa_allowance_spreads_more_tasks(numa2_allowance):
    """Four busy loops: more running tasks than imb_numa_nr, so the load
    balancer evens out idle CPUs across the nodes (it moved two of them,
    each time this was run by hand)."""
    got = numa2_allowance["4"]
    assert got["started_home"]
    assert got["most_on_other"] >= 1, got
    assert sum(cpu in got["other"] for cpu in got["final_cpus"]) >= 1, got
