"""Tests for tools/schedsteal/schedstat.py (fixtures: fixtures/schedstat/README.md)."""

import json
from pathlib import Path

import pytest
from schedsteal import schedstat as ss
from schedsteal.guest import kernel

FIX = Path(__file__).parent / "fixtures" / "schedstat"
STEAL_FIELDS = ["found_idle_cpu_easy", "found_idle_cpu", "found_idle_core", "nofound_idle_cpu",
                "find_time", "steal", "steal_fail"]


def fx(name):
    return str(FIX / name)


def text(name):
    return (FIX / name).read_text()


def rec(name):
    return json.loads(text(name))


def mk(version, cpus, timestamp=100):
    """Minimal schedstat text: {cpu: [numbers]} with no domain lines (like !CONFIG_SMP)."""
    lines = [f"version {version}", f"timestamp {timestamp}"]
    lines += [f"cpu{c} " + " ".join(map(str, v)) for c, v in cpus.items()]
    return "\n".join(lines) + "\n"


def mk_rec(before, after, stat_b="cpu 0 0 0 100\n", stat_a="cpu 50 0 0 150\n", t0=1.0, t1=2.0):
    return ss.make_recording({"time": t0, "schedstat": before, "stat": stat_b},
                             {"time": t1, "schedstat": after, "stat": stat_a}, ["x"], 0)


@pytest.fixture
def registry(monkeypatch):
    """Private copy of the version table so tests may register layouts freely."""
    monkeypatch.setattr(ss, "_LAYOUTS", dict(ss._LAYOUTS))


def run_main(capsys, *argv):
    rc = ss.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out, err


# ----------------------------------------------------------------- layouts --

def test_field_tables():
    for v, ndom, named in ((15, 36, False), (16, 36, False), (17, 45, True)):
        lay = ss.get_layout(v)
        assert list(lay.cpu_fields) == ["yld_count", "array_exp", "sched_count", "sched_goidle",
                                        "ttwu_count", "ttwu_local", "rq_cpu_time", "run_delay",
                                        "pcount"]
        assert len(lay.domain_fields) == ndom == len(set(lay.domain_fields))
        assert lay.domain_has_name is named
        assert lay.domain_fields[-12:] == tuple(ss.DOMAIN_TAIL_FIELDS)
    assert ss.get_layout(15).domain_fields[:9] == (
        "lb_count_idle", "lb_balanced_idle", "lb_failed_idle", "lb_imbalance_idle",
        "lb_gained_idle", "lb_hot_gained_idle", "lb_nobusyq_idle", "lb_nobusyg_idle",
        "lb_count_busy")
    v17 = ss.get_layout(17).domain_fields
    assert v17[3:7] == ("lb_imbalance_load_busy", "lb_imbalance_util_busy",
                        "lb_imbalance_task_busy", "lb_imbalance_misfit_busy")
    assert v17[11] == "lb_count_idle" and v17[22] == "lb_count_newidle"
    assert ss.supported_versions() == [15, 16, 17, 116, 117, 118]


# ----------------------------------------------------------------- parsing --

def test_parse_v15():
    snap = ss.parse_schedstat(text("schedstat_v15.txt"))
    assert (snap.version, snap.timestamp, sorted(snap.cpus)) == (15, 4295347219, [0, 1, 2, 3])
    cpu1 = snap.cpus[1]
    assert cpu1.fields["yld_count"] == 1234
    assert cpu1.fields["array_exp"] == 0
    assert cpu1.fields["sched_count"] == 52345678
    assert cpu1.fields["sched_goidle"] == 21000000
    assert cpu1.fields["ttwu_count"] == 30111222
    assert cpu1.fields["rq_cpu_time"] == 3123456789012
    assert cpu1.fields["pcount"] == 31345678
    assert [(d.level, d.name, d.span) for d in cpu1.domains] == [(0, None, "3"), (1, None, "f")]
    assert [d.span for d in snap.cpus[2].domains] == ["c", "f"]
    assert snap.cpus[2].domains[0].cpus() == [2, 3]
    d1 = cpu1.domains[1]
    assert d1.label == "domain1"
    assert (d1.fields["lb_count_idle"], d1.fields["lb_count_busy"],
            d1.fields["lb_count_newidle"]) == (11001, 22002, 33003)
    assert d1.fields["lb_imbalance_idle"] == 444
    assert d1.fields["alb_count"] == 55
    assert d1.fields["ttwu_wake_remote"] == 66006
    assert d1.fields["ttwu_move_affine"] == 7007
    assert d1.fields["sbe_count"] == 0
    assert snap.warnings == []


def test_parse_v16():
    snap = ss.parse_schedstat(text("schedstat_v16.txt"))
    assert snap.version == 16 and len(snap.cpus) == 4
    cpu2 = snap.cpus[2]
    assert cpu2.fields["sched_count"] == 48000000
    assert cpu2.fields["sched_goidle"] == 19000000
    assert cpu2.fields["ttwu_local"] == 15000000
    assert cpu2.fields["run_delay"] == 300000000000
    dom0 = cpu2.domains[0]
    assert dom0.span == "00000000,0000000c" and dom0.cpus() == [2, 3]
    assert cpu2.domains[1].cpus() == [0, 1, 2, 3]
    # v16 blocks are busy, idle, newidle
    assert dom0.fields["lb_count_busy"] == 1601
    assert dom0.fields["lb_count_idle"] == 1602
    assert dom0.fields["lb_count_newidle"] == 1603
    assert dom0.fields["lb_failed_busy"] == 16
    assert dom0.fields["lb_gained_newidle"] == 1604
    assert dom0.fields["alb_pushed"] == 3
    assert dom0.fields["ttwu_wake_remote"] == 160016


def test_idle_type_order_differs_between_v15_and_v16():
    nums = list(range(1, 37))   # number i sits at 1-based position i
    body = "cpu0 " + " ".join(["1"] * 9) + "\ndomain0 3 " + " ".join(map(str, nums)) + "\n"
    v15 = ss.parse_schedstat("version 15\ntimestamp 1\n" + body).cpus[0].domains[0].fields
    v16 = ss.parse_schedstat("version 16\ntimestamp 1\n" + body).cpus[0].domains[0].fields
    assert (v15["lb_count_idle"], v15["lb_count_busy"], v15["lb_count_newidle"]) == (1, 9, 17)
    assert (v16["lb_count_busy"], v16["lb_count_idle"], v16["lb_count_newidle"]) == (1, 9, 17)
    assert v15["lb_nobusyg_busy"] == v16["lb_nobusyg_idle"] == 16
    assert v15["alb_count"] == v16["alb_count"] == 25
    assert v15["ttwu_move_balance"] == v16["ttwu_move_balance"] == 36


def test_parse_v17_names():
    snap = ss.parse_schedstat(text("schedstat_v17.txt"))
    assert sorted(snap.cpus) == [0, 1, 2]
    assert [(d.level, d.name) for d in snap.cpus[0].domains] == [(0, "SMT"), (1, "MC")]
    # cpu3 is offline: cpu2 has no SMT level, its domain0 is MC
    [mc] = snap.cpus[2].domains
    assert (mc.level, mc.name, mc.span, mc.label, mc.cpus()) == (0, "MC", "07", "MC", [0, 1, 2])
    assert len(mc.fields) == 45
    assert mc.fields["lb_count_busy"] == 1701
    assert mc.fields["lb_imbalance_util_busy"] == 1702
    assert mc.fields["lb_imbalance_misfit_newidle"] == 1703
    assert mc.fields["lb_nobusyg_idle"] == 1704
    assert mc.fields["ttwu_move_affine"] == 1705
    assert snap.cpus[2].fields["sched_count"] == 17171717
    assert snap.cpus[2].fields["pcount"] == 9876543


# A real version 17 file: Debian's 7.3.4 cloud kernel (7.3.4-1~bpo13+1)
# booted under qemu on 2026-11-24, 4 cpus on 2 sockets; how it was recorded
# is in fixtures/schedstat/README.md ("The Debian 7.3.4 capture").
DEB73 = "schedstat-v17-debian-7.3.4-cloud-amd64.txt"
DEB73_BEFORE = "schedstat-v17-debian-7.3.4-cloud-amd64-before.txt"
DEB73_HZ = 250   # CONFIG_HZ of that kernel: the recording's times come from the jiffies

# The fields as that kernel's Documentation/scheduler/sched-stats.rst numbers
# them (cpu<N> 1-9; domain<N> <name> <cpumask> 1-45), in the order it lists them.
DOC_V17_CPU = ["yld_count",        # 1) sched_yield() calls
               "array_exp",        # 2) legacy O(1) field, always zero
               "sched_count",      # 3) schedule() calls
               "sched_goidle",     # 4) schedule() left the cpu idle
               "ttwu_count",       # 5) try_to_wake_up() calls
               "ttwu_local",       # 6) ... to wake up the local cpu
               "rq_cpu_time",      # 7) time spent running, ns
               "run_delay",        # 8) time spent waiting to run, ns
               "pcount"]           # 9) timeslices run
DOC_V17_DOMAIN = [f"{name}_{itype}"
                  # 1-11 "when the cpu was busy", 12-22 "idle", 23-33 "just becoming idle"
                  for itype in ("busy", "idle", "newidle")
                  for name in ("lb_count",             # sched_balance_rq() called
                               "lb_balanced",          # found the load did not need balancing
                               "lb_failed",            # tried to move tasks and failed
                               "lb_imbalance_load",    # total imbalance in load
                               "lb_imbalance_util",    # ... in utilization
                               "lb_imbalance_task",    # ... in number of tasks
                               "lb_imbalance_misfit",  # ... due to misfit tasks
                               "lb_gained",            # detach_task() called
                               "lb_hot_gained",        # ... on a cache-hot task
                               "lb_nobusyq",           # no busier queue found
                               "lb_nobusyg")] + [      # busier queue but no busier group
    "alb_count", "alb_failed", "alb_pushed",           # 34-36 active_load_balance()
    "sbe_count", "sbe_balanced", "sbe_pushed",         # 37-39 sched_balance_exec(), not used
    "sbf_count", "sbf_balanced", "sbf_pushed",         # 40-42 sched_balance_fork(), not used
    "ttwu_wake_remote", "ttwu_move_affine", "ttwu_move_balance"]   # 43-45 try_to_wake_up()


def test_v17_layout_is_the_documented_one():
    lay = ss.get_layout(17)
    assert list(lay.cpu_fields) == DOC_V17_CPU
    assert list(lay.domain_fields) == DOC_V17_DOMAIN
    assert lay.domain_has_name


def test_parse_real_v17():
    snap = ss.parse_schedstat(text(DEB73), DEB73)
    assert (snap.version, snap.timestamp, sorted(snap.cpus)) == (17, 4294894817, [0, 1, 2, 3])
    assert snap.warnings == []
    for cpu in snap.cpus.values():
        assert [(d.level, d.name) for d in cpu.domains] == [(0, "MC"), (1, "PKG")]
        assert cpu.domains[1].span == "f" and cpu.domains[1].cpus() == [0, 1, 2, 3]
    assert [snap.cpus[c].domains[0].span for c in range(4)] == ["3", "3", "c", "c"]
    assert snap.cpus[2].domains[0].cpus() == [2, 3]
    cpu0 = snap.cpus[0].fields
    assert (cpu0["sched_count"], cpu0["sched_goidle"], cpu0["ttwu_count"]) == (2809, 461, 1421)
    assert (cpu0["rq_cpu_time"], cpu0["run_delay"], cpu0["pcount"]) == (5677901357, 3469044329,
                                                                      2113)
    pkg = snap.cpus[2].domains[1].fields
    assert pkg["lb_imbalance_load_busy"] == 5678      # doc field 4
    assert pkg["lb_imbalance_util_idle"] == 8700      # doc field 16
    assert pkg["lb_imbalance_util_newidle"] == 1408   # doc field 27
    assert pkg["ttwu_wake_remote"] == 114 and pkg["ttwu_move_affine"] == 51   # 43, 44


@pytest.mark.parametrize("name", [DEB73, DEB73_BEFORE])
def test_real_v17_every_number_lands_on_its_documented_field(name):
    """Field N of every line of the capture is the documented field N."""
    raw = [line.split() for line in text(name).splitlines()[2:]]
    snap = ss.parse_schedstat(text(name))
    lines = [x for c in snap.cpus.values()
             for x in [(c.fields, DOC_V17_CPU, 0)] + [(d.fields, DOC_V17_DOMAIN, 2)
                                                      for d in c.domains]]
    assert len(lines) == len(raw) == 12
    for (fields, doc, skip), toks in zip(lines, raw):
        numbers = toks[1 + skip:]              # after cpuN, or domainN <name> <cpumask>
        assert len(numbers) == len(doc) == len(fields)
        assert all(fields[n] == int(v) for n, v in zip(doc, numbers))


@pytest.mark.parametrize("name", [DEB73, DEB73_BEFORE])
def test_real_v17_counters_agree_with_each_other(name):
    """What the document says of the fields holds in the capture; a field
    read from the wrong position would break some of it."""
    for cpu in ss.parse_schedstat(text(name)).cpus.values():
        f = cpu.fields
        assert f["array_exp"] == 0                                 # "always set to zero"
        assert f["ttwu_local"] <= f["ttwu_count"] and f["sched_goidle"] <= f["sched_count"]
        for d in cpu.domains:
            g = d.fields
            assert all(g[f"{k}_{x}"] == 0 for k in ("sbe", "sbf")      # "not used"
                       for x in ("count", "balanced", "pushed"))
            assert g["alb_failed"] + g["alb_pushed"] <= g["alb_count"]
            for t in ("busy", "idle", "newidle"):
                assert g[f"lb_balanced_{t}"] + g[f"lb_failed_{t}"] <= g[f"lb_count_{t}"]
                assert g[f"lb_nobusyq_{t}"] + g[f"lb_nobusyg_{t}"] <= g[f"lb_balanced_{t}"]
                assert g[f"lb_hot_gained_{t}"] <= g[f"lb_gained_{t}"]
                assert g[f"lb_imbalance_misfit_{t}"] == 0   # a guest of equal cpus: no misfits


def deb73_recording():
    before, after = text(DEB73_BEFORE), text(DEB73)
    times = [ss.parse_schedstat(t).timestamp / DEB73_HZ for t in (before, after)]
    return ss.make_recording(
        {"time": times[0], "schedstat": before,
         "stat": text("proc-stat-debian-7.3.4-cloud-amd64-before.txt")},
        {"time": times[1], "schedstat": after,
         "stat": text("proc-stat-debian-7.3.4-cloud-amd64.txt")}, ["load"], 0)


def test_report_real_v17():
    rep = ss.compute_report(deb73_recording())
    assert (rep["version"], rep["ncpus"], rep["cpus"], rep["warnings"]) == (17, 4, "0-3", [])
    s = rep["summary"]
    assert s["time"] == pytest.approx(1595 / 250)
    # the aggregate cpu line of /proc/stat: busy 2+327+24 -> 115+892+60, idle 608 -> 1634
    assert s["busy_pct"] == pytest.approx(100 * 714 / 1740)
    # per-cpu deltas, by hand: sched_count 2032 1863 2156 2218, sched_goidle 223 280 219
    # 127, ttwu_count 858 745 879 1062; rq_cpu_time 14584094555 ns over 6694 timeslices
    assert (s["sched"], s["idle"], s["wake"]) == (8269 / 4, 849 / 4, 3544 / 4)
    assert s["slice_ms"] == pytest.approx(14584094555 / 6694 / 1e6)
    assert rep["domains"] == {"MC": {"levels": [0], "ncpus": 4, "cpus": "0-3"},
                              "PKG": {"levels": [1], "ncpus": 4, "cpus": "0-3"}}
    assert rep["domain_fields"]["MC"]["lb_count_busy"]["total"] == 61 + 52 + 58 + 60
    assert rep["domain_fields"]["PKG"]["lb_imbalance_util_idle"]["total"] == \
        5514 + 1460 + (8700 - 6291) + (2325 - 1380)
    assert list(rep["domain_fields"]["PKG"]) == DOC_V17_DOMAIN


def test_report_real_v17_cli(tmp_path, capsys):
    path = tmp_path / "deb73.json"
    path.write_text(json.dumps(deb73_recording()))
    rc, out, err = run_main(capsys, "report", str(path), "--domains")
    assert rc == 0 and err == ""
    assert "schedstat v17, 4 cpus: 0-3" in out.splitlines()[0]
    lines = out.splitlines()
    assert "  MC: level 0, 4 cpus, span 0-3" in lines
    assert "  PKG: level 1, 4 cpus, span 0-3" in lines
    row = next(line for line in lines if line.split()[:1] == ["lb_count_busy"])
    # MC 84+68+65+76 - (23+16+7+16), PKG 41+30+35+37 - (10+7+3+7)
    assert row.split() == ["lb_count_busy", "231", "116"]


def test_show_real_v17(capsys):
    rc, out, err = run_main(capsys, "show", fx(DEB73), "--domains")
    assert rc == 0 and err == ""
    assert out.splitlines()[0] == "schedstat v17, timestamp 4294894817, 4 cpus"
    head = next(line for line in out.splitlines() if line.split()[:1] == ["field"]).split()
    assert head[1:] == [f"cpu{c}/{d}" for c in range(4) for d in ("MC", "PKG")]


def test_v17_domain_without_name_is_tolerated():
    t = "version 17\ntimestamp 1\ncpu0 " + "0 " * 9 + "\ndomain0 03 " + "1 " * 45 + "\n"
    [d] = ss.parse_schedstat(t).cpus[0].domains
    assert (d.name, d.span, d.label) == (None, "03", "domain0")


def test_v16_rejects_domain_name():
    t = "version 16\ntimestamp 1\ncpu0 " + "0 " * 9 + "\ndomain0 SMT 03 " + "1 " * 36 + "\n"
    with pytest.raises(ss.SchedstatError, match=r":4: expected a cpumask"):
        ss.parse_schedstat(t)


def test_extra_fields_are_kept_and_warned_once(capsys):
    snap = ss.parse_schedstat(text("schedstat_v16_extras.txt"))
    for c in range(4):
        assert snap.cpus[c].fields["cpu_extra10"] == 7
        assert snap.cpus[c].fields["cpu_extra11"] == 8 + c
        assert all(d.fields["domain_extra37"] == 99 for d in snap.cpus[c].domains)
    assert snap.cpus[0].fields["pcount"] > 0
    assert len(snap.warnings) == 2
    rc, out, err = run_main(capsys, "show", fx("schedstat_v16_extras.txt"))
    assert rc == 0
    assert err.count("cpu_extra10") == 1 and err.count("domain_extra37") == 1
    assert "cpu_extra11" in out


def test_register_version(registry):
    lay = ss.register_version(99, ss.CPU_FIELDS + STEAL_FIELDS,
                              ss.domain_fields(ss.LB_FIELDS_V17, ss.IDLE_ORDER_V16),
                              domain_has_name=True)
    assert lay.version == 99 and 99 in ss.supported_versions()
    snap = ss.parse_schedstat(mk(99, {0: list(range(16))}))
    assert snap.cpus[0].fields["find_time"] == 13
    assert snap.cpus[0].fields["steal_fail"] == 15
    assert snap.warnings == []
    with pytest.raises(ValueError):
        ss.register_version(99, ss.CPU_FIELDS, [])
    with pytest.raises(ValueError):
        ss.register_version(98, ["a", "a"], [])
    ss.register_version(16, ss.CPU_FIELDS + ["steal"], ss.get_layout(16).domain_fields,
                        replace=True)
    assert ss.parse_schedstat(mk(16, {0: list(range(10))})).cpus[0].fields["steal"] == 9


def test_unknown_version_names_supported_ones():
    with pytest.raises(ss.SchedstatError, match=r":1: unsupported schedstat version 12 "
                                                r"\(supported: 15, 16, 17"):
        ss.parse_schedstat(text("bad_version.txt"), "x")


@pytest.mark.parametrize("name, where", [
    ("bad_version.txt", "version 12"),
    ("missing_version.txt", ":1: expected 'version N'"),
    ("missing_timestamp.txt", ":2: expected 'timestamp J'"),
    ("non_numeric.txt", ":6: non-numeric value '12a4'"),
    ("truncated_domain.txt", ":11: 31 numbers, version 16 needs 36"),
    ("domain_before_cpu.txt", ":3: domain0 line before any cpu line"),
    ("duplicate_cpu.txt", ":15: cpu0 appears twice"),
    ("empty.txt", "empty input"),
    ("no_such_file.txt", "cannot read"),
])
def test_malformed_input_exits_2(capsys, name, where):
    rc, out, err = run_main(capsys, "show", fx(name))
    assert rc == 2
    assert err.startswith("schedstat: error: ")
    assert where in err
    assert out == ""


@pytest.mark.parametrize("bad", [
    "version 16\ntimestamp 1\n",                                   # no cpu lines
    "version 16\ntimestamp 1\ncpu0 1 2 3\n",                        # too few cpu fields
    "version 16\ntimestamp 1\ncpu0 " + "-1 " * 9 + "\n",            # negative number
    "version 16\ntimestamp 1\ncpu0 " + "0 " * 9 + "\nfoo 1 2\n",    # unknown line
    "version x\ntimestamp 1\n",
    "version 16\ntimestamp 1\ncpu0 " + "0 " * 9 + "\ndomain0\n",    # no cpumask
])
def test_malformed_strings(bad):
    with pytest.raises(ss.SchedstatError):
        ss.parse_schedstat(bad)


def test_cpumask_helpers():
    assert ss.cpumask_to_list("00000000,000000ff") == list(range(8))
    assert ss.cpumask_to_list("00000001,00000001") == [0, 32]
    assert ss.cpumask_to_list("0") == []
    with pytest.raises(ss.SchedstatError):
        ss.cpumask_to_list("xyz")
    assert ss.format_cpulist([8, 0, 1, 2, 3, 10, 11]) == "0-3,8,10-11"
    assert ss.format_cpulist([]) == ""


def test_parse_proc_stat():
    st = ss.parse_proc_stat(text("proc_stat_sample.txt"))
    assert set(st) == {"cpu", "cpu0", "cpu1"}
    first = text("proc_stat_sample.txt").splitlines()[0].split()
    assert [st["cpu"][c] for c in ss.PROC_STAT_COLUMNS] == [int(x) for x in first[1:11]]
    old = ss.parse_proc_stat("cpu  10 0 5 80\ncpu0 10 0 5 80 5\nintr 1 2\n")
    assert old["cpu"]["iowait"] == 0 and old["cpu0"]["iowait"] == 5
    assert ss.busy_total(old["cpu0"]) == (15, 100)
    # guest time is already inside user: not counted twice
    assert ss.busy_total(ss.parse_proc_stat("cpu 100 0 0 100 0 0 0 0 40 0\n")["cpu"]) == (100, 200)
    with pytest.raises(ss.SchedstatError):
        ss.parse_proc_stat("cpu 1 2 3\n")


# ---------------------------------------------------------------- report --

def test_compute_report_by_hand():
    rep = ss.compute_report(rec("recording_v16_base.json"))
    s = rep["summary"]
    assert set(s) == {"time", "busy_pct", "slice_ms", "sched", "idle", "wake"}
    assert s["time"] == pytest.approx(10.0)
    assert s["busy_pct"] == pytest.approx(75.0)                 # 3000 of 4000 jiffies
    assert s["slice_ms"] == pytest.approx(7.5e9 / 24000 / 1e6)  # 0.3125 ms
    assert (s["sched"], s["idle"], s["wake"]) == (10000, 4000, 6000)
    assert rep["ncpus"] == 4 and rep["version"] == 16 and rep["cpus"] == "0-3"
    assert rep["cpu_fields"]["sched_count"] == {"total": 40000, "avg": 10000}
    assert rep["cpu_fields"]["yld_count"] == {"total": 20, "avg": 5}
    assert rep["cpu_fields"]["rq_cpu_time"]["total"] == 7_500_000_000
    assert list(rep["cpu_fields"]) == list(ss.CPU_FIELDS)
    assert rep["domain_fields"]["domain0"]["lb_count_newidle"] == {"total": 2000, "avg": 500}
    assert rep["domain_fields"]["domain1"]["lb_imbalance_busy"]["total"] == 12000
    assert rep["domain_fields"]["domain1"]["ttwu_move_affine"]["total"] == 180
    assert rep["domains"]["domain0"] == {"levels": [0], "ncpus": 4, "cpus": "0-3"}
    assert rep["per_cpu"][1]["sched_count"] == 12000
    assert rep["warnings"] == []


def test_report_text(capsys):
    rc, out, err = run_main(capsys, "report", fx("recording_v16_base.json"))
    assert rc == 0 and err == ""
    lines = out.splitlines()
    i = next(n for n, line in enumerate(lines) if line.split()[:1] == ["time"])
    assert lines[i].split() == ["time", "%busy", "slice", "sched", "idle", "wake"]
    assert lines[i + 1].split() == ["10.000", "75.00", "0.312", "10000", "4000", "6000"]
    for name in ss.CPU_FIELDS:
        assert any(line.split()[:1] == [name] for line in lines)
    assert "sched_count        40000" in out
    assert "lb_count_busy" not in out and "per-cpu" not in out


GUEST = Path(__file__).parent / "fixtures" / "guest"


def test_report_states_units_and_explains_its_columns(capsys):
    rc, out, _ = run_main(capsys, "report", str(GUEST / "recording_v118.json"))
    assert rc == 0
    lines = out.splitlines()
    # cpu fields keep their raw names, with a unit per row
    end = lines.index("summary columns:")
    rows = {line.split()[0]: line.split() for line in lines[:end] if line.startswith("  ")}
    assert rows["field"][-1] == "unit"
    for name in ("rq_cpu_time", "run_delay", "find_time"):
        assert rows[name][-1] == "ns", name
    for name in ("sched_count", "steal", "nofound_idle_cpu"):
        assert rows[name][-1] == "count", name
    # the footer says what each summary column is, and in what unit
    legend = lines[lines.index("summary columns:"):]
    text = "\n".join(legend)
    for col, words in (("time", "s"), ("slice", "ms"), ("%busy", "/proc/stat"),
                       ("%find", "find_time"), ("far", "steal_node + steal_numa"),
                       ("%found", "nofound_idle_cpu")):
        [line] = [ln for ln in legend if ln.split()[:1] == [col]]
        assert words in line, (col, line)
    assert "rq_cpu_time, run_delay and find_time are in ns" in text
    # --json is unchanged: no units or legend in it
    rc, out, _ = run_main(capsys, "report", str(GUEST / "recording_v118.json"), "--json")
    assert set(json.loads(out)) == {"version", "ncpus", "cpus", "excluded_cpus", "cmd",
                                    "exit_code", "uname", "summary", "cpu_fields",
                                    "domain_fields", "domains", "per_cpu", "warnings"}


def test_report_footer_names_only_the_columns_shown(capsys):
    _, out, _ = run_main(capsys, "report", fx("recording_v16_base.json"))
    legend = out.splitlines()[out.splitlines().index("summary columns:"):]
    assert [ln.split()[0] for ln in legend[1:] if ln.startswith("  ")] == [
        "time", "%busy", "slice", "sched", "idle", "wake"]


@pytest.mark.parametrize("command", ["report", "diff"])
def test_help_explains_the_columns(capsys, command):
    rc, out, _ = run_main(capsys, command, "--help")
    assert rc == 0
    for col, words in (("%find", "find_time"), ("%found", "found_idle_cpu"),
                       ("far", "steal_node"), ("slice", "ms")):
        [line] = [ln for ln in out.splitlines() if ln.split()[:1] == [col]]
        assert words in line
    assert "ns" in out


def test_report_domains_and_per_cpu(capsys):
    rc, out, _ = run_main(capsys, "report", fx("recording_v16_base.json"), "--domains", "--per-cpu")
    assert rc == 0
    row = next(line for line in out.splitlines() if line.split()[:1] == ["lb_count_newidle"])
    assert row.split() == ["lb_count_newidle", "2000", "1600"]
    row = next(line for line in out.splitlines() if line.split()[:1] == ["cpu1"])
    assert row.split()[3] == "12000"


def test_report_json(capsys):
    rc, out, _ = run_main(capsys, "report", fx("recording_v16_base.json"), "--json")
    assert rc == 0
    data = json.loads(out)
    assert {"summary", "cpu_fields", "domain_fields", "ncpus", "version"} <= set(data)
    assert set(data["summary"]) == {"time", "busy_pct", "slice_ms", "sched", "idle", "wake"}
    assert data["cpu_fields"]["ttwu_count"] == {"total": 24000, "avg": 6000.0}
    assert data["domain_fields"]["domain1"]["alb_count"]["total"] == 8
    assert data["ncpus"] == 4 and data["version"] == 16


def test_steal_fields_as_extras_without_layout(capsys):
    rc, out, err = run_main(capsys, "report", fx("recording_v16_steal.json"), "--json")
    assert rc == 0
    data = json.loads(out)
    assert err.count("warning") == 1 and "cpu_extra10" in err
    assert "find_pct" not in data["summary"] and "steal" not in data["summary"]
    assert data["cpu_fields"]["cpu_extra14"]["total"] == 200_000_000     # find_time


def test_steal_summary_with_registered_layout(registry, capsys):
    ss.register_version(16, ss.CPU_FIELDS + STEAL_FIELDS, ss.get_layout(16).domain_fields,
                        replace=True)
    rep = ss.compute_report(rec("recording_v16_steal.json"))
    assert rep["warnings"] == []
    assert rep["summary"]["find_pct"] == pytest.approx(100 * 4 * 5e7 / (10e9 * 4))   # 0.5 %
    assert rep["summary"]["steal"] == 1500
    assert rep["cpu_fields"]["steal_fail"]["total"] == 40
    rc, out, _ = run_main(capsys, "report", fx("recording_v16_steal.json"))
    assert rc == 0
    hdr = next(line for line in out.splitlines() if line.split()[:1] == ["time"])
    assert hdr.split() == ["time", "%busy", "slice", "sched", "idle", "wake", "%find", "steal",
                           "%found"]
    i = out.splitlines().index(hdr)
    # each cpu: found_idle_cpu +100, found_idle_core and nofound_idle_cpu +0
    assert out.splitlines()[i + 1].split()[-3:] == ["0.50", "1500", "100.0"]


def test_hotplugged_cpu_is_excluded(capsys):
    before = mk(16, {0: [0, 0, 100, 10, 0, 0, 0, 0, 5], 1: [0, 0, 100, 10, 0, 0, 0, 0, 5]})
    after = mk(16, {0: [0, 0, 300, 20, 0, 0, 1000, 0, 15], 2: [0, 0, 999, 0, 0, 0, 0, 0, 0]})
    rep = ss.compute_report(mk_rec(before, after))
    assert rep["ncpus"] == 1 and rep["cpus"] == "0" and rep["excluded_cpus"] == "1-2"
    assert rep["summary"]["sched"] == 200
    assert rep["summary"]["slice_ms"] == pytest.approx(1000 / 10 / 1e6)
    assert any("present in only one snapshot" in w for w in rep["warnings"])


def test_negative_delta_is_reported_with_warning(tmp_path, capsys):
    before = mk(16, {0: [0, 0, 4294967000, 0, 7, 0, 0, 0, 0]})
    after = mk(16, {0: [0, 0, 200, 0, 9, 0, 0, 0, 0]})
    path = tmp_path / "wrap.json"
    path.write_text(json.dumps(mk_rec(before, after)))
    rc, out, err = run_main(capsys, "report", str(path), "--json")
    assert rc == 0
    assert json.loads(out)["cpu_fields"]["sched_count"]["total"] == 200 - 4294967000
    assert "warning: cpu0 sched_count went backwards" in err


def test_schedstats_disabled_hint():
    t = mk(16, {0: [0, 0, 0, 0, 0, 0, 500, 10, 5]})
    rep = ss.compute_report(mk_rec(t, t))
    assert any("sched_schedstats" in w for w in rep["warnings"])
    assert rep["summary"]["slice_ms"] is None and rep["summary"]["busy_pct"] == pytest.approx(50)


def test_version_change_is_an_error():
    with pytest.raises(ss.SchedstatError, match="version changed"):
        ss.compute_report(mk_rec(mk(15, {0: [0] * 9}), mk(16, {0: [0] * 9})))


@pytest.mark.parametrize("content, msg", [
    ('{"format": "something-else"}', "not a schedsteal-schedstat-recording"),
    ('{"format": "schedsteal-schedstat-recording", "format_version": 1}', "'before' needs"),
    ('{"format": "schedsteal-schedstat-recording", "format_version": 9}', "format_version 9"),
    ('{"format": ', "invalid JSON"),
    ("version 16\ntimestamp 1\n", "use 'show'"),
])
def test_bad_recording_exits_2(tmp_path, capsys, content, msg):
    path = tmp_path / "bad.json"
    path.write_text(content)
    rc, out, err = run_main(capsys, "report", str(path))
    assert rc == 2 and out == ""
    assert err.startswith("schedstat: error: ") and msg in err


def test_bad_schedstat_inside_recording_exits_2(tmp_path, capsys):
    r = rec("recording_v16_base.json")
    r["after"]["schedstat"] = text("truncated_domain.txt")
    path = tmp_path / "r.json"
    path.write_text(json.dumps(r))
    rc, _, err = run_main(capsys, "report", str(path))
    assert rc == 2 and "after schedstat:11:" in err


def _bad_recording(change):
    r = rec("recording_v16_base.json")
    change(r)
    return r


BAD_RECORDINGS = {
    "cmd 5": (lambda r: r.update(cmd=5), "'cmd' must be a list of strings"),
    "cmd string": (lambda r: r.update(cmd="hackbench"), "'cmd' must be a list of strings"),
    "cmd list of numbers": (lambda r: r.update(cmd=["sleep", 1]),
                            "'cmd' must be a list of strings"),
    "format_version true": (lambda r: r.update(format_version=True),
                            "unsupported format_version True"),
    "format_version 0": (lambda r: r.update(format_version=0), "unsupported format_version 0"),
    "negative elapsed": (lambda r: r["after"].update(time=r["before"]["time"] - 1.0),
                         "after.time is before before.time"),
    "NaN time": (lambda r: r["before"].update(time=float("nan")), "'before' needs"),
    "bool time": (lambda r: r["after"].update(time=True), "'after' needs"),
    "exit_code string": (lambda r: r.update(exit_code="0"), "'exit_code'"),
}


@pytest.mark.parametrize("what", list(BAD_RECORDINGS))
@pytest.mark.parametrize("command", ["report", "diff"])
def test_bad_recording_fields_exit_2(tmp_path, capsys, what, command):
    change, msg = BAD_RECORDINGS[what]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_bad_recording(change)))
    args = [command, str(path)]
    if command == "diff":
        args.insert(1, fx("recording_v16_base.json"))
    rc, out, err = run_main(capsys, *args)
    assert (rc, out) == (2, "")
    assert err.startswith("schedstat: error: ") and msg in err, err


# ------------------------------------------------------------------ diff --

def test_diff_reports():
    a = ss.compute_report(rec("recording_v16_base.json"))
    b = ss.compute_report(rec("recording_v16_new.json"))
    d = ss.diff_reports(a, b)
    assert list(d["summary"]) == ["time", "busy_pct", "slice_ms", "sched", "idle", "wake"]
    assert d["summary"]["time"]["a"] == pytest.approx(10.0)
    assert d["summary"]["time"]["b"] == pytest.approx(8.0)
    assert d["summary"]["time"]["pct_delta"] == pytest.approx(-20.0)
    assert d["summary"]["idle"]["pct_delta"] == pytest.approx(-75.0)
    assert d["summary"]["busy_pct"]["b"] == pytest.approx(100 * 860 / 960)
    assert d["cpu_fields"]["pcount"]["pct_delta"] == pytest.approx((7000 - 6000) / 6000 * 100)
    assert d["cpu_fields"]["array_exp"]["pct_delta"] is None      # A == 0


def test_diff_cli(capsys):
    rc, out, _ = run_main(capsys, "diff", fx("recording_v16_base.json"),
                          fx("recording_v16_new.json"))
    assert rc == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert rows["time"] == ["time", "10.000", "8.000", "(-20.00%)"]
    assert rows["sched"] == ["sched", "10000", "8000", "(-20.00%)"]
    assert rows["pcount"] == ["pcount", "6000.0", "7000.0", "(16.67%)"]
    assert rows["array_exp"] == ["array_exp", "0.0", "0.0"]             # blank %delta
    rc, out, _ = run_main(capsys, "diff", fx("recording_v16_base.json"),
                          fx("recording_v16_new.json"), "--json")
    data = json.loads(out)
    assert data["summary"]["wake"] == {"a": 6000.0, "b": 6000.0, "pct_delta": 0.0}


def test_diff_warns_when_the_cpu_counts_differ(tmp_path, capsys):
    row = [0, 0, 100, 10, 0, 0, 1000, 0, 5]
    later = [0, 0, 300, 20, 0, 0, 3000, 0, 15]
    for name, n in (("two.json", 2), ("four.json", 4)):
        before = mk(16, {c: row for c in range(n)})
        after = mk(16, {c: later for c in range(n)})
        (tmp_path / name).write_text(json.dumps(mk_rec(before, after)))
    a, b = str(tmp_path / "two.json"), str(tmp_path / "four.json")
    rc, out, err = run_main(capsys, "diff", a, b)
    assert rc == 0 and "summary" in out
    assert err == ("schedstat: warning: A has 2 cpus, B has 4: the per-CPU averages "
                   "come from machines of different sizes\n")
    rc, out, err = run_main(capsys, "diff", a, b, "--json")
    assert rc == 0 and "A has 2 cpus, B has 4" in err
    data = json.loads(out)
    assert data["warnings"] == ["A has 2 cpus, B has 4: the per-CPU averages come from "
                                "machines of different sizes"]
    rc, out, err = run_main(capsys, "diff", a, a, "--json")
    assert rc == 0 and err == "" and json.loads(out)["warnings"] == []


def test_diff_states_its_sign_convention(capsys):
    # abbench's %chg is "+ = B better"; a schedstat counter is neither
    # better nor worse, so diff prints a plain delta under another name and
    # says so above every table that has the column.
    _, out, _ = run_main(capsys, "diff", fx("recording_v16_base.json"),
                         fx("recording_v16_new.json"))
    lines = out.splitlines()
    assert "%change" not in out
    heads = [n for n, line in enumerate(lines) if line.split()[:1] == ["metric"]
             or line.split()[:1] == ["field"]]
    assert len(heads) == 2
    for n in heads:
        assert lines[n].split()[-1] == "%delta"
        assert "%delta = (B-A)/A, + = B higher" in "\n".join(lines[n - 2:n])


# ---------------------------------------------------------------- record --

def record_args(tmp_path, *cmd):
    return ["record", "-o", str(tmp_path / "out.json"),
            "--schedstat-path", fx("schedstat_v16.txt"),
            "--stat-path", fx("proc_stat_sample.txt"), "--", *cmd]


def test_record_true(tmp_path, capsys):
    rc, out, err = run_main(capsys, *record_args(tmp_path, "true"))
    assert rc == 0 and out == ""
    assert "schedstat: recording true ..." in err and "wrote" in err
    r = ss.load_recording(str(tmp_path / "out.json"))
    assert r["format"] == "schedsteal-schedstat-recording" and r["format_version"] == 1
    assert r["cmd"] == ["true"] and r["exit_code"] == 0
    assert r["before"]["schedstat"] == text("schedstat_v16.txt")
    assert r["after"]["stat"] == text("proc_stat_sample.txt")
    assert r["after"]["time"] >= r["before"]["time"]
    assert isinstance(r["uname"], str)
    rep = ss.compute_report(r)      # identical snapshots: all-zero deltas
    assert rep["cpu_fields"]["sched_count"]["total"] == 0


def test_record_passes_exit_code_through(tmp_path, capsys):
    rc, _, _ = run_main(capsys, *record_args(tmp_path, "sh", "-c", "exit 3"))
    assert rc == 3
    assert ss.load_recording(str(tmp_path / "out.json"))["exit_code"] == 3


def test_record_fails_early_on_bad_schedstat(tmp_path, capsys):
    marker = tmp_path / "ran"
    args = record_args(tmp_path, "touch", str(marker))
    args[args.index("--schedstat-path") + 1] = fx("non_numeric.txt")
    rc, _, err = run_main(capsys, *args)
    assert rc == 2 and "non-numeric" in err
    assert not marker.exists() and not (tmp_path / "out.json").exists()


def test_record_errors(tmp_path, capsys):
    rc, _, err = run_main(capsys, *record_args(tmp_path))
    assert rc == 2 and "no command" in err
    rc, _, err = run_main(capsys, *record_args(tmp_path, str(tmp_path / "no-such-cmd")))
    assert rc == 2 and "cannot run" in err
    args = record_args(tmp_path, "true")
    args[args.index("--schedstat-path") + 1] = str(tmp_path / "missing")
    rc, _, err = run_main(capsys, *args)
    assert rc == 2 and "CONFIG_SCHEDSTATS" in err


def test_snapshot_and_make_recording():
    snap = kernel.schedstat_snapshot(fx("schedstat_v17.txt"), fx("proc_stat_sample.txt"))
    assert set(snap) == {"time", "schedstat", "stat"}
    assert snap["schedstat"].startswith("version 17\n")
    r = ss.make_recording(snap, snap, ("a", "b"), 5)
    assert r["cmd"] == ["a", "b"] and r["exit_code"] == 5
    assert ss.validate_recording(r) is r
    assert ss.compute_report(r)["domain_fields"]["MC"]["lb_count_busy"]["total"] == 0
    assert ss.compute_report(r)["domains"]["MC"] == {"levels": [0, 1], "ncpus": 3, "cpus": "0-2"}
    assert ss.compute_report(r)["domains"]["SMT"] == {"levels": [0], "ncpus": 2, "cpus": "0-1"}


# ------------------------------------------------------------------ show --

def test_show(capsys):
    rc, out, err = run_main(capsys, "show", fx("schedstat_v17.txt"), "--domains")
    assert rc == 0 and err == ""
    assert out.splitlines()[0] == "schedstat v17, timestamp 4298765432, 3 cpus"
    assert "cpu2/MC" in out and "cpu0/SMT" in out
    row = next(line for line in out.splitlines() if line.split()[:1] == ["cpu2"])
    assert row.split()[3] == "17171717"
    rc, out, _ = run_main(capsys, "show", fx("schedstat_v15.txt"), "--json")
    data = json.loads(out)
    assert data["version"] == 15 and data["cpus"]["1"]["fields"]["yld_count"] == 1234


def test_usage_errors_return_2(capsys):
    assert ss.main([]) == 2
    assert ss.main(["report", "--bogus"]) == 2
    assert ss.main(["--help"]) == 0
    capsys.readouterr()


def help_text(capsys):
    assert ss.main(["--help"]) == 0
    out, _ = capsys.readouterr()
    return out


def version_rows(out):
    """{version: row} of the table of layouts that --help ends with."""
    lines = out.splitlines()
    start = next(n for n, line in enumerate(lines) if line.split()[:2] == ["version", "kernels"])
    return {int(line.split()[0]): line for line in lines[start + 1:]
            if line.split() and line.split()[0].isdigit()}


def test_help_says_where_each_version_comes_from(capsys):
    out = help_text(capsys)
    rows = version_rows(out)
    assert sorted(rows) == ss.supported_versions()
    for v, row in rows.items():
        assert ss.get_layout(v).kernels and ss.get_layout(v).kernels in row
    # upstream: 16 came with 6.10 (enum cpu_idle_type reordered), 17 with
    # 6.14 (domain names, lb_imbalance split); the series' own from its patches
    assert "up to 6.9" in rows[15]
    assert "6.10 to 6.13" in rows[16]
    assert "6.14 and later" in rows[17] and "7.3.4" in rows[17]
    assert "0006-0018" in rows[116] and "0019-0032" in rows[117] and "0033" in rows[118]
    assert max(len(line) for line in out.splitlines()) <= 100


def test_help_lists_a_newly_registered_version(registry, capsys):
    ss.register_version(99, ss.CPU_FIELDS, [], kernels="a test kernel")
    ss.register_version(98, ss.CPU_FIELDS, [])
    rows = version_rows(help_text(capsys))
    assert "a test kernel" in rows[99]
    assert "not stated" in rows[98]


def test_parse_v116_steal_fields():
    text = (FIX / "schedstat_v116.txt").read_text()
    snap = ss.parse_schedstat(text)
    assert snap.version == 116
    cpu1 = snap.cpus[1].fields
    assert cpu1["pcount"] == ss.parse_schedstat(
        (FIX / "schedstat_v16.txt").read_text()).cpus[1].fields["pcount"]
    assert cpu1["found_idle_cpu_easy"] == 240
    assert cpu1["find_time"] == 3000000
    assert cpu1["steal_attempt"] == 100 and cpu1["steal"] == 40 and cpu1["steal_fail"] == 60
    assert not any(k.startswith("cpu_extra") for k in cpu1)
    # Domain lines are version 16's.
    assert snap.cpus[0].domains[0].fields.keys() == \
        ss.parse_schedstat((FIX / "schedstat_v16.txt").read_text()).cpus[0].domains[0].fields.keys()


@pytest.mark.parametrize("version,fields,expected", [
    (117, ss.PARK_CPU_FIELDS, {"park_push": 4, "park_evac": 8, "park_pinned": 1}),
    (118, ss.FAR_STEAL_CPU_FIELDS, {"steal_beyond": 20, "steal_node": 5, "steal_numa": 2}),
])
def test_parse_appended_cpu_fields(version, fields, expected):
    """Each series version appends cpu fields to the previous one's line."""
    snap = ss.parse_schedstat((FIX / f"schedstat_v{version}.txt").read_text())
    prev = ss.parse_schedstat((FIX / f"schedstat_v{version - 1}.txt").read_text())
    assert snap.version == version
    cpu1 = snap.cpus[1].fields
    assert {k: cpu1[k] for k in fields} == expected
    assert {k: v for k, v in cpu1.items() if k not in fields} == prev.cpus[1].fields
    assert not any(k.startswith("cpu_extra") for k in cpu1)


def test_v117_line_is_truncated_for_v118():
    """A v118 header over v117's cpu lines is refused, not misread."""
    text = (FIX / "schedstat_v117.txt").read_text().replace("version 117", "version 118", 1)
    with pytest.raises(ss.SchedstatError, match="truncated"):
        ss.parse_schedstat(text)


def test_summary_far_is_node_plus_numa_steals():
    text = (FIX / "schedstat_v118.txt").read_text()
    # cpu0 steals 4 more tasks from another LLC and 2 from another node.
    after_text = text.replace(" 7 0 12 3 1\n", " 7 0 14 7 3\n", 1)
    assert after_text != text
    rep = ss.compute_report(mk_rec(text, after_text))
    assert rep["summary"]["steal_far"] == pytest.approx((4 + 2) / 4)
    assert "far" in ss.render_report(rep).split()


def test_summary_has_no_far_before_v118():
    text = (FIX / "schedstat_v117.txt").read_text()
    rep = ss.compute_report(mk_rec(text, text))
    assert "steal_far" not in rep["summary"]
