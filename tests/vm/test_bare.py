"""abbench run as on bare metal (README "Bare metal"), in one smp2 boot:
started in the background as a user would, stopped mid-run by SIGINT and
then by SIGTERM, it leaves the scheduler features, kernel.sched_schedstats,
the tracefs instances and the top-level tracing state as they were; a
short run that completes records the machine.

The runner's trace instance enables the sched events a third time (the
boot's trace_event= and vm.py's trace_instance= hold the first two), so
no code is patched under multi-threaded TCG (guest/trace.py)."""
import json

import pytest

from conftest import boot
from schedsteal import abbench, vm

T = "/sys/kernel/tracing"
# Both sides differ from the defaults (STEAL and NI_RELAX off: 0035,
# 0034), so the state is changed at whatever point of a run it is read.
RUN = ("python3 -m schedsteal.abbench run --a feat:STEAL --b feat:STEAL,NI_RELAX "
       "--workload hackbench-process-pipe --param 2 --warmup 0 ")

# state NAME: what a run may change, one JSON object in $SCHEDSTEAL_OUT/NAME.
# Each interrupted run: in the background (so with SIGINT ignored, as a
# shell's "&" does), waited for until its instance exists (A and B have
# been applied and schedstats switched on by then), given 2 s to be in
# its first workload run, then signalled.
SCRIPT = f"""set -e
state() {{
	python3 -c 'import json, os, sys
f = lambda p: open(p).read().strip()
json.dump({{"features": f("/sys/kernel/debug/sched/features").split(),
	"sched_schedstats": f("/proc/sys/kernel/sched_schedstats"),
	"instances": sorted(os.listdir("{T}/instances")),
	"tracing_on": f("{T}/tracing_on"), "buffer_size_kb": f("{T}/buffer_size_kb")}},
	open(sys.argv[1], "w"))' "$SCHEDSTEAL_OUT/$1.json"
}}
state before
for sig in INT TERM; do
	{RUN} --loops 1000000 --runs 5 --trace-dir "$SCHEDSTEAL_OUT/t-$sig" \\
		--out "$SCHEDSTEAL_OUT/$sig.json" >"$SCHEDSTEAL_OUT/$sig.log" 2>&1 &
	pid=$!
	i=0
	while [ ! -d "{T}/instances/schedsteal-$pid" ]; do
		i=$((i + 1)); [ $i -le 600 ] || {{ cat "$SCHEDSTEAL_OUT/$sig.log"; exit 90; }}
		sleep 0.1
	done
	state "during-$sig"
	sleep 2
	kill -$sig $pid
	rc=0; wait $pid || rc=$?
	echo $rc >"$SCHEDSTEAL_OUT/rc-$sig"
	state "after-$sig"
done
{RUN} --loops 50 --runs 1 --trace-dir "$SCHEDSTEAL_OUT/t-done" \\
	--out "$SCHEDSTEAL_OUT/done.json"
state after-done
uname -r >"$SCHEDSTEAL_OUT/release"
"""


@pytest.mark.full
def test_bare_metal_run_restores_everything_on_sigint_and_sigterm(test_kernel, tmp_path):
    boot(test_kernel, "smp2", SCRIPT, keep=str(tmp_path))
    state = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("*.json")
             if p.stem in ("before", "after-done") or p.stem.startswith(("during-", "after-"))}
    before = state["before"]
    # vm.py's boot instance only; STEAL off by default (0035)
    assert before["instances"] == ["schedsteal-boot"]
    assert {"NO_STEAL", "NO_NI_RELAX"} <= set(before["features"])
    for sig, status in (("INT", 130), ("TERM", 143)):
        log = (tmp_path / f"{sig}.log").read_text()
        during = state[f"during-{sig}"]
        # the run had changed what it must restore; its own instance is there
        assert "STEAL" in during["features"], log
        assert during["sched_schedstats"] == "1"
        assert len(during["instances"]) == 2, during
        assert int((tmp_path / f"rc-{sig}").read_text()) == status, log
        assert state[f"after-{sig}"] == before, log
        doc = json.loads((tmp_path / f"{sig}.json").read_text())
        assert doc["complete"] is False
        assert doc["error"] == ("interrupted" if sig == "INT" else "terminated")
        assert "abbench: restored" in log and "warning" not in log, log
    assert state["after-done"] == before

    doc = abbench.load_results(str(tmp_path / "done.json"))
    assert doc["complete"] is True and len(doc["runs"]) == 2
    assert all(r["trace_lost"] == 0 and (tmp_path / r["trace"]).stat().st_size > 0
               for r in doc["runs"])
    m = doc["machine"]
    assert m["release"] == (tmp_path / "release").read_text().strip()
    assert m["online"] == "0-1"
    expected = vm.PRESETS["smp2"].expected()
    assert m["topology"] == {k: len(expected[k])
                             for k in ("smt_groups", "llc_groups", "numa_nodes")}
    assert m["model_name"]                      # QEMU's CPU model
    assert m["scaling_governor"] == ["none"]    # no cpufreq in the guest
    assert "trace_instance=schedsteal-boot" in m["cmdline"]
    assert "machine: " in abbench.format_report(abbench.analyze(doc, base_dir=str(tmp_path)))
