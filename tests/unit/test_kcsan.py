"""schedsteal-kcsan: parsing KCSAN reports and sorting them into the
series' and the base kernel's."""
import json
import re
from pathlib import Path

import pytest

from schedsteal import kcsan

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "kcsan" / "storm.txt"

PATCH = """\
From 1 Mon Sep 17 00:00:00 2001
Subject: [PATCH] sched/fair: a patch

--- a/kernel/sched/fair.c
+++ b/kernel/sched/fair.c
@@ -10,6 +10,12 @@ static int sched_balance_newidle(struct rq *this_rq, struct rq_flags *rf)
 	int x;
+	if (steal_enabled())
+		return 1;
+static void steal_from(struct rq *dst_rq, int cpu)
+{
+	return;
+}
+int steal_declared(int cpu);
--- a/Documentation/scheduler/sched-steal.rst
+++ b/Documentation/scheduler/sched-steal.rst
@@ -1,3 +1,4 @@ Stealing
+doc_function(x) is not code
"""


def test_reports_are_parsed_with_both_stacks():
    reports = kcsan.parse_reports(FIXTURE.read_text())
    assert [r.title for r in reports] == [
        "sis_idle_exit / steal_from", "n_tty_receive_buf_common / n_tty_write",
        "sis_idle_exit / steal_from", "tick_nohz_idle_stop_tick+0x1d2/0x3a0"]
    first = reports[0]
    assert first.kind == "data-race"
    assert [(a.op, a.size, a.context, a.cpu) for a in first.accesses] == [
        ("write", 8, "task 0", 3), ("read", 8, "task 0", 1)]
    assert first.accesses[0].frames[:2] == ["sis_idle_exit", "do_idle"]
    assert first.accesses[1].frames == ["steal_from", "sched_balance_newidle",
                                        "pick_next_task_fair"]
    # "read (marked)", symbols with a suffix, and the one-stack report
    assert reports[1].accesses[0].op == "read"
    assert reports[1].accesses[0].frames[1] == "file_tty_write"
    assert reports[3].accesses[0].frames == ["tick_nohz_idle_stop_tick", "do_idle"]


def test_series_functions_are_definitions_and_changed_contexts(tmp_path):
    (tmp_path / "steal").mkdir()
    (tmp_path / "steal" / "0001-a.patch").write_text(PATCH)
    (tmp_path / "steal" / "0000-cover-letter.patch").write_text(
        PATCH.replace("steal_from", "cover_only"))
    got = kcsan.series_functions(tmp_path)
    assert got == {"sched_balance_newidle", "steal_from"}


def test_the_real_series_names_its_own_functions():
    got = kcsan.series_functions()
    assert {"steal_from", "sis_idle_exit", "sched_park_update", "sparsemask_set_elem"} <= got
    assert "n_tty_write" not in got and "do_idle" not in got


def test_classify_counts_races_and_blames_the_series_first():
    reports = kcsan.parse_reports(FIXTURE.read_text())
    rows = kcsan.classify(reports, {"steal_from", "sis_idle_exit"})
    assert [(r["owner"], r["count"], r["title"]) for r in rows] == [
        ("series", 2, "sis_idle_exit / steal_from"),
        ("base", 1, "n_tty_receive_buf_common / n_tty_write"),
        ("base", 1, "tick_nohz_idle_stop_tick+0x1d2/0x3a0")]
    assert rows[0]["series_frames"] == ["sis_idle_exit", "steal_from"]


def test_only_the_top_frames_count():
    reports = kcsan.parse_reports(FIXTURE.read_text())
    # pick_next_task_fair is the third frame of the read: outside 2 frames
    assert all(r["owner"] == "base"
               for r in kcsan.classify(reports, {"pick_next_task_fair"}, frames=2))
    assert kcsan.classify(reports, {"pick_next_task_fair"}, frames=3)[0]["owner"] == "series"


def test_cli_exit_status_says_whose_races(tmp_path, capsys):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "0001-a.patch").write_text(PATCH)
    assert kcsan.main([str(FIXTURE), "--patches", str(tmp_path / "p")]) == 1
    out = capsys.readouterr().out
    assert "4 KCSAN reports, 3 distinct; 1 distinct in the series' functions" in out
    assert re.search(r"^series +2 +data-race +sis_idle_exit / steal_from +sched_balance_newidle, steal_from$", out, re.M)
    clean = tmp_path / "clean.txt"
    clean.write_text("[    0.000000] Linux version 6.12\n")
    assert kcsan.main([str(clean), "--patches", str(tmp_path / "p")]) == 0
    assert capsys.readouterr().out.strip() == "no KCSAN reports"
    assert kcsan.main([str(FIXTURE), "--patches", str(tmp_path / "p"), "--json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["owner"] == "series" and rows[0]["count"] == 2


@pytest.mark.parametrize("args, message", [
    (["missing.txt"], "missing.txt: No such file"),
    (["NOTLOG"], "has no kernel log line"),
    (["FIXTURE", "--patches", "EMPTY"], "no patches under"),
])
def test_bad_input_is_a_clear_error(tmp_path, capsys, args, message):
    (tmp_path / "notlog.txt").write_text("hello\n")
    (tmp_path / "empty").mkdir()
    subst = {"NOTLOG": str(tmp_path / "notlog.txt"), "FIXTURE": str(FIXTURE),
             "EMPTY": str(tmp_path / "empty"), "missing.txt": str(tmp_path / "missing.txt")}
    argv = [subst.get(a, a) for a in args]
    assert kcsan.main(argv) == 2
    assert message in capsys.readouterr().err


def test_frames_must_be_positive(capsys):
    with pytest.raises(SystemExit) as exc:
        kcsan.main([str(FIXTURE), "--frames", "0"])
    assert exc.value.code == 2
    assert "schedsteal-kcsan: error: --frames must be 1 or more" in capsys.readouterr().err


BASE = "b" * 40
SERIES = "5" * 40


def fake_tools(tree):
    """git and faddr2line as the kernel tree would answer: fair.c's line
    200 is the series', every other line the base's; steal_from's access
    is in a base helper inlined at line 200, sis_idle_exit's at 10."""
    calls = []

    def run(cmd):
        calls.append(cmd)
        if cmd[-2:] == ["rev-parse", "base"]:
            return BASE + "\n"
        if cmd[0].endswith("faddr2line"):
            where = cmd[-1]
            if where.startswith("steal_from"):
                return (f"{where}:\ncpumask_test_cpu at {tree}/include/linux/cpumask.h:5\n"
                        f" (inlined by) steal_from at {tree}/kernel/sched/fair.c:200\n")
            if where.startswith("sched_idle_cpu"):
                return (f"{where}:\nsched_idle_rq at {tree}/kernel/sched/fair.c:10\n"
                        f" (inlined by) sched_idle_cpu at {tree}/kernel/sched/fair.c:200\n")
            if where.startswith("_find_next_and_bit"):
                return f"{where}:\n_find_next_and_bit at {tree}/lib/find_bit.c:70\n"
            if where.startswith("sg_exclude_parked"):
                return f"{where}:\nsg_exclude_parked at {tree}/kernel/sched/fair.c:200\n"
            return f"{where}:\nsis_idle_exit at {tree}/kernel/sched/fair.c:10\n"
        if "blame" in cmd:
            path = cmd[-1]
            return "".join(f"{'^' if path.endswith('.h') else ''}"
                           f"{SERIES if (path.endswith('fair.c') and n == 200) else BASE}"
                           f" {n}) code\n" for n in range(1, 301))
        raise AssertionError(cmd)
    return run, calls


def test_line_owner_blames_the_inline_chain(tmp_path):
    (tmp_path / "vmlinux").write_text("")
    run, calls = fake_tools(tmp_path)
    owner = kcsan.LineOwner(tmp_path / "vmlinux", tmp_path, run=run)
    assert owner.chain("steal_from+0x5b/0x2b0") == [
        ("include/linux/cpumask.h", 5), ("kernel/sched/fair.c", 200)]
    # the return address less one
    assert calls[-1][-1] == "steal_from+0x5a/0x2b0"
    assert owner.series_lines("steal_from+0x5b/0x2b0") == ["kernel/sched/fair.c:200"]
    assert owner.series_lines("sis_idle_exit+0x4a/0x90") == []
    # a base helper inlined into a line the series changed: the helper's
    # line made the access (KCSAN's first run: sched_idle_rq()'s read of
    # nr_running under sched_idle_cpu(), whose line parking changed)
    assert owner.series_lines("sched_idle_cpu+0x10/0x40") == []
    # each file is blamed once
    owner.series_lines("steal_from+0x5b/0x2b0")
    # fair.c only (the header is not where the access is), and once
    assert sum("blame" in c for c in calls) == 1


def test_classify_by_lines_overrides_the_function_rule(tmp_path):
    (tmp_path / "vmlinux").write_text("")
    run, _ = fake_tools(tmp_path)
    owner = kcsan.LineOwner(tmp_path / "vmlinux", tmp_path, run=run)
    reports = kcsan.parse_reports(FIXTURE.read_text())
    rows = kcsan.classify(reports, {"sis_idle_exit", "steal_from", "do_idle"}, lines=owner)
    first = rows[0]
    assert (first["owner"], first["title"]) == ("series", "sis_idle_exit / steal_from")
    assert first["series_frames"] == ["kernel/sched/fair.c:200"]
    # a base line in a function the series changed is the base's
    rows = kcsan.classify(reports[3:], {"tick_nohz_idle_stop_tick"}, lines=owner)
    assert rows[0]["owner"] == "base"


def test_line_owner_refuses_a_tree_without_base(tmp_path):
    (tmp_path / "vmlinux").write_text("")
    with pytest.raises(kcsan.KcsanError, match="not a tree with a 'base' tag"):
        kcsan.LineOwner(tmp_path / "vmlinux", tmp_path, run=lambda cmd: "fatal\n")
    with pytest.raises(kcsan.KcsanError, match="no vmlinux"):
        kcsan.LineOwner(tmp_path / "nothing", tmp_path, run=lambda cmd: BASE)


def test_vmlinux_needs_tree(capsys):
    with pytest.raises(SystemExit) as exc:
        kcsan.main([str(FIXTURE), "--vmlinux", "v"])
    assert exc.value.code == 2
    assert "--vmlinux and --tree go together" in capsys.readouterr().err


def test_assert_reports_and_reordered_accesses_are_parsed():
    log = """[ 1.0] ==================================================================
[ 1.0] BUG: KCSAN: assert: race in steal_from / sched_park_store
[ 1.0] 
[ 1.0] assert no writes (reordered) to 0xff1100000000 of 8 bytes by task 1 on cpu 0:
[ 1.0]  steal_from+0x10/0x20
[ 1.0] 
[ 1.0] read-write (marked, reordered) to 0xff1100000000 of 8 bytes by task 2 on cpu 1:
[ 1.0]  sched_park_store+0x12c/0x1c0
[ 1.0] 
[ 1.0] Reported by Kernel Concurrency Sanitizer on:
[ 1.0] ==================================================================
"""
    (r,) = kcsan.parse_reports(log)
    assert r.kind == "assert: race"
    assert [(a.op, a.frames) for a in r.accesses] == [
        ("assert no writes", ["steal_from"]), ("read-write", ["sched_park_store"])]


def test_a_line_that_cannot_be_blamed_counts_as_the_series(tmp_path):
    (tmp_path / "vmlinux").write_text("")

    def run(cmd):
        if cmd[-2:] == ["rev-parse", "base"]:
            return BASE + "\n"
        if cmd[0].endswith("faddr2line"):
            return f"{cmd[-1]}:\n?? at ??:0\n" if "mystery" in cmd[-1] else \
                f"{cmd[-1]}:\nf at /elsewhere/gen.c:3\n"
        return ""  # git blame of a file it does not know
    owner = kcsan.LineOwner(tmp_path / "vmlinux", tmp_path, run=run)
    assert owner.series_lines("mystery+0x1/0x2") == ["??:0: not blamed"]
    assert owner.series_lines("f+0x1/0x2") == ["/elsewhere/gen.c:3: not blamed"]


def test_an_access_in_an_out_of_line_helper_belongs_to_its_caller(tmp_path):
    """Review 39, finding 4: with many CPUs a cpumask walk calls
    _find_next_and_bit() in lib/ out of line; the caller's line, the
    series' here, asked for the access."""
    (tmp_path / "vmlinux").write_text("")
    run, _ = fake_tools(tmp_path)
    owner = kcsan.LineOwner(tmp_path / "vmlinux", tmp_path, run=run)
    frames = ["_find_next_and_bit+0x30/0x90", "sg_exclude_parked+0x44/0x100", "x+0x1/0x2"]
    assert owner.access_frame(frames) == "sg_exclude_parked+0x44/0x100"
    assert owner.series_lines(frames) == ["kernel/sched/fair.c:200"]
    # a base caller of the helper stays the base's
    assert owner.series_lines(["_find_next_and_bit+0x30/0x90", "sis_idle_exit+0x4a/0x90"]) == []
    # an access made outside lib/ is not passed on to its caller
    assert owner.access_frame(["sis_idle_exit+0x4a/0x90", "sg_exclude_parked+0x44/0x100"]) \
        == "sis_idle_exit+0x4a/0x90"
    # only helpers all the way down: the first frame, as before
    assert owner.access_frame(["_find_next_and_bit+0x30/0x90"]) == "_find_next_and_bit+0x30/0x90"
