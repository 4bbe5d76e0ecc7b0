"""schedsteal-guests (schedsteal.guests) and its guest half
(schedsteal.guest.guests_probe): the plan's checks, the pairs' network,
the teardown of a fleet, the table from a recorded run."""
import json
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from schedsteal import guests
from schedsteal.guest import guests_probe as probe

FIXTURE = Path(__file__).parent / "fixtures" / "guests" / "one-run.json"


@pytest.mark.parametrize("change,msg", [
    (dict(pairs=0), "--pairs"), (dict(vcpus=0), "--vcpus"),
    (dict(static="0,x"), "--static"), (dict(vcpus=2, static="2"), "CPUs of the guest"),
    (dict(workers=0), "--workers"), (dict(seconds=0), "--seconds"),
    (dict(runs=0), "--runs"), (dict(stress="a"), "--stress"), (dict(stress="65"), "0 to 64"),
    (dict(modes="all,bogus"), "--modes"), (dict(interval_ms=50), "--interval-ms"),
])
def test_plan_refuses_bad_input(change, msg):
    with pytest.raises(guests.GuestsError, match=msg):
        guests.Plan(**change).check()


def test_pairs_are_linked_to_each_other_only():
    specs = guests.pair_specs(2, [4000, 4001, 4002, 4003])
    by = {g.name: g for g in specs}
    assert [g.name for g in specs] == ["client0", "server0", "client1", "server1"]
    c, s = by["client0"], by["server0"]
    assert (c.local_port, c.remote_port) == (s.remote_port, s.local_port) == (4000, 4001)
    assert c.addr == "10.9.0.1/24" and c.peer == "10.9.0.2" and s.peer == "10.9.0.1"
    assert by["client1"].addr == "10.9.1.1/24"
    assert len({g.mac for g in specs}) == 4
    opts = c.qemu_opts()
    assert opts[0].startswith("-netdev dgram,id=pair,local.type=inet,local.host=127.0.0.1,"
                              "local.port=4000,")
    assert "remote.host=127.0.0.1,remote.port=4001" in opts[0]
    assert opts[1] == f"-device virtio-net-pci,netdev=pair,mac={c.mac}"
    with pytest.raises(guests.GuestsError):
        guests.pair_specs(2, [1, 2, 3])


def test_free_udp_ports_are_distinct():
    ports = guests.free_udp_ports(4)
    assert len(set(ports)) == 4 and all(p > 0 for p in ports)


def test_guest_commands():
    plan = guests.Plan(workers=16, seconds=20, settle_s=5, runs=4, stress="0,2")
    c, s = guests.pair_specs(1, [1, 2])
    assert plan.guest_cmd(s, "/x/rr") == ("python3 guest/guests_probe.py server --addr "
                                          "10.9.0.2/24 --rr /x/rr --static 0")
    cmd = plan.guest_cmd(c, "/x/rr")
    assert "client --addr 10.9.0.1/24" in cmd and "--peer 10.9.0.2 --workers 16" in cmd
    assert "--runs 4 --stress 0,2 --modes all,static,governor" in cmd
    assert cmd.endswith('--barrier "$SCHEDSTEAL_OUT"')
    # 2 variants x 4 runs x 3 modes, each settle + seconds + slack, plus the boots.
    assert plan.timeout() == 24 * 45 + 900


def test_schedule_alternates_the_order_of_modes():
    got = probe.schedule(["all", "static", "governor"], 2, [0, 2])
    assert [m for s, r, m in got if s == 0] == ["all", "static", "governor",
                                                "governor", "static", "all"]
    assert [(s, r) for s, r, _ in got][6] == (2, 0)


def test_parse_rr_and_its_absence():
    assert probe.parse_rr("transactions 1201 seconds 3.051 workers 8 tps 393.6\n") == {
        "transactions": 1201, "seconds": 3.051, "workers": 8, "tps": 393.6}
    with pytest.raises(probe.ProbeError):
        probe.parse_rr("rr: connect: Connection refused")


def test_steal_pct_over_every_column():
    before = {"cpu": {"user": 100, "idle": 100, "steal": 0}}
    after = {"cpu": {"user": 150, "idle": 120, "steal": 30}}
    assert probe.steal_pct(before, after) == 30.0


def test_rr_builds_and_answers_on_loopback(tmp_path):
    """guest/rr.c on the host: a client gets whole responses from a server."""
    rr = guests.build_rr(str(tmp_path))
    srv = subprocess.Popen([rr, "server", "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().startswith("listening")
    finally:
        srv.kill()
        srv.wait()
    # Port 0 cannot be connected to: pick one and serve it.
    port = guests.free_udp_ports(1)[0]
    srv = subprocess.Popen([rr, "server", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline() == f"listening {port}\n"
        out = subprocess.run([rr, "client", "127.0.0.1", str(port), "2", "0.2"],
                             capture_output=True, text=True, check=True).stdout
        got = probe.parse_rr(out)
        assert got["workers"] == 2 and got["transactions"] > 0
    finally:
        srv.kill()
        srv.wait()
    bad = subprocess.run([rr, "client", "127.0.0.1", str(port), "0", "1"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr


class FakeResult:
    def __init__(self, ok, status=0, monitor=None):
        self.ok, self.status, self.monitor = ok, status, monitor
        self.timed_out = self.died = False
        self.splats, self.output = [], "gone\n"


def test_a_failed_guest_stops_the_others_and_nothing_is_left():
    """Teardown: the server fails at once; the client's monitor, which
    holds its session (here a sleeping process group), kills it."""
    fleet = guests.Fleet()
    started = threading.Event()

    def client(monitor):
        proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
        stop = threading.Event()
        box = {}
        t = threading.Thread(target=lambda: box.setdefault("m", monitor(proc.pid, "", stop)))
        t.start()
        started.set()
        proc.wait()             # killed by the monitor on abort
        stop.set()
        t.join()
        return FakeResult(False, status=-9, monitor=box["m"])

    def server(monitor):
        started.wait(10)
        return FakeResult(False, status=3, monitor={"aborted": False})

    threads = [fleet.boot("client0", client), fleet.boot("server0", server)]
    for t in threads:
        t.join(30)
    assert fleet.abort.is_set()
    assert "server0" in fleet.errors and "status 3" in fleet.errors["server0"]
    assert "client0" not in fleet.errors            # it was stopped, not failing
    assert fleet.results["client0"].monitor == {"aborted": True}
    assert fleet.leaks() == []


def test_leaks_names_and_kills_a_session_left_running():
    fleet = guests.Fleet()
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    fleet.sessions["server0"] = proc.pid
    assert fleet.leaks(grace_s=0.2) == ["server0"]
    assert proc.wait(10) == -signal.SIGKILL
    assert fleet.leaks() == []


def test_table_from_a_recorded_run(capsys):
    result = json.loads(FIXTURE.read_text())
    rows = guests.summary(result)
    assert [(r["stress"], r["mode"]) for r in rows] == [
        (0, "all"), (0, "static"), (0, "governor"), (1, "all"), (1, "static"), (1, "governor")]
    static = rows[1]
    assert static["tps"] == pytest.approx(641.1)
    assert static["tps_chg"] == pytest.approx(100 * (641.1 / 393.6 - 1))
    assert rows[0]["bogo"] is None and rows[4]["bogo"] > 0
    assert guests.main(["report", str(FIXTURE)]) == 0
    out = capsys.readouterr().out
    assert "+ = higher (better)" in out and "left behind: nothing" in out


def test_report_json_and_bad_files(capsys, tmp_path):
    assert guests.main(["report", str(FIXTURE), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["leaks"] == [] and len(got["summary"]) == 6
    bad = tmp_path / "bad.json"
    bad.write_text('{"plan": {}}')
    assert guests.main(["report", str(bad)]) == 2
    assert "not a schedsteal-guests result" in capsys.readouterr().err
    assert guests.main(["report", str(tmp_path / "none.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_run_refuses_bad_input_before_booting(capsys, tmp_path):
    k = tmp_path / "bzImage"
    k.write_text("")
    assert guests.main(["run", "--kernel", str(k), "--pairs", "9"]) == 2
    assert "--pairs 9" in capsys.readouterr().err
    assert guests.main(["run", "--kernel", str(tmp_path / "none")]) == 2
    assert "no kernel image" in capsys.readouterr().err
    assert guests.main(["run", "--kernel", str(k), "--plot", "x.bmp"]) == 2
    assert not any(p.name.startswith("schedsteal-guests.") for p in tmp_path.iterdir())


def test_plot_writes_a_png(tmp_path):
    out = tmp_path / "g.png"
    assert guests.main(["report", str(FIXTURE), "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_governor_is_compared_with_the_static_set(capsys):
    got = guests.governor_vs_static(json.loads(FIXTURE.read_text()))
    assert [s for s, _, _ in got] == [0, 1]
    assert got[0][1] == pytest.approx(100 * (723.4 / 641.1 - 1))
    assert got[0][2] is None            # one run a cell: no p
    assert guests.main(["report", str(FIXTURE)]) == 0
    assert "governor against static, stress 0: +12.8% tps" in capsys.readouterr().out


def test_control_connection_waits_longer_than_its_connect(monkeypatch):
    """A 2-pair run failed: the connect's 5 s timeout stayed on the socket
    and a mode switch on a loaded host took longer."""
    calls = []

    class Sock:
        def settimeout(self, t):
            calls.append(t)
    monkeypatch.setattr(probe.socket, "create_connection", lambda addr, timeout: Sock())
    probe.connect_peer("10.9.0.2")
    assert calls == [probe.RPC_TIMEOUT_S] and probe.RPC_TIMEOUT_S >= 60


def test_barrier_releases_a_cell_when_every_client_is_ready(tmp_path):
    fleet = guests.Fleet()
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    bar = guests.Barrier(fleet, ["client0", "client1"])
    assert not bar.step()                       # no guest has booted yet
    fleet.outdirs.update(client0=str(a), client1=str(b))
    (a / "ready").write_text("0\n")
    assert not bar.step() and not (a / "go").exists()   # client1 not ready
    (b / "ready").write_text("0\n")
    assert bar.step() and (a / "go").read_text() == (b / "go").read_text() == "0\n"
    assert not bar.step()                       # cell 1: nobody ready yet
    (a / "ready").write_text("1\n")
    (b / "ready").write_text("1\n")
    assert bar.step() and bar.released == 1 and (b / "go").read_text() == "1\n"


def test_probe_barrier_waits_for_the_hosts_go(tmp_path):
    (tmp_path / "go").write_text("0\n")
    t = threading.Timer(0.3, lambda: (tmp_path / "go").write_text("1\n"))
    t.start()
    probe.barrier(str(tmp_path), 1)
    t.join()
    assert (tmp_path / "ready").read_text() == "1\n"
    with pytest.raises(probe.ProbeError, match="no go for cell 2"):
        probe.barrier(str(tmp_path), 2, tries=2)


def test_pref_summary_weights_each_count_by_its_time():
    """The governor's size over a cell: 2 CPUs for 1 s, 3 for 0.5 s, then
    2 again; the last sample only closes the window."""
    got = probe.pref_summary([(0.0, 2), (1.0, 3), (1.5, 2), (2.0, 2)])
    assert got == {"mean": pytest.approx(2.25), "seconds": {"2": 1.5, "3": 0.5}, "changes": 2}
    assert probe.pref_summary([]) == {"mean": None, "seconds": {}, "changes": 0}
    assert probe.pref_summary([(0.0, 4)])["mean"] == 4


def test_table_shows_the_preferred_count_where_recorded(capsys):
    """A run recorded before the probe sampled the count shows "-"; with
    the samples, the mean over the guests and runs."""
    result = json.loads(FIXTURE.read_text())
    assert all(r["pref"] is None for r in guests.summary(result))
    for pair in result["pairs"]:
        for row in pair["rows"]:
            for side, mean in (("client", 1.0), ("server", 2.0)):
                row[side]["pref"] = {"mean": mean, "seconds": {}, "changes": 0}
    assert all(r["pref"] == pytest.approx(1.5) for r in guests.summary(result))
    assert "time-weighted over the measured window" in guests.format_summary(result)


def test_pref_sampler_reads_preferred_until_stopped(monkeypatch):
    """The sampler thread counts the CPUs of /sys/.../preferred; stop()
    summarises the samples from `since` on."""
    seen = iter(["0-3"] * 2 + ["0-1"] * 1000)
    monkeypatch.setattr(probe.kernel, "preferred", lambda: next(seen))
    monkeypatch.setattr(probe, "PREF_POLL_S", 0.01)
    s = probe.PrefSampler()
    s.start()
    while len(s.samples) < 6:
        threading.Event().wait(0.01)
    got = s.stop()
    assert not s.is_alive()
    assert [c for _, c in s.samples[:3]] == [4, 4, 2]
    assert got["changes"] == 1 and set(got["seconds"]) == {"4", "2"}
    late = s.samples[2][0]
    assert probe.pref_summary([x for x in s.samples if x[0] >= late])["changes"] == 0
