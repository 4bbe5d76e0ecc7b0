"""Overcommitted guests that talk to each other: ``schedsteal-guests``.

The parking design's own experiment (issue 25) at this host's scale:
pairs of guests booted at once from our kernel, each pair on a network of
its own, one guest of each pair driving a request/response load
(guest/rr.c: a 200-byte request, a 30,000-byte response, many workers)
against the other, with and without stress-ng workers in every guest,
under three modes switched in both guests of a pair together:

  all       every vCPU used, the steal governor off
  static    only --static CPUs preferred in each guest (the rest parked
            by hand): its fair share of the host, as the design's
            "vCPUs 2-5 parked"
  governor  every CPU, the steal governor on: it finds the size itself

    schedsteal-guests run --kernel bzImage [--qemu lab] [--pairs 1]
        [--vcpus 3] [--static 0] [--workers 8] [--seconds 20]
        [--settle-s 5] [--runs 3] [--stress 0,2] [--modes all,static,governor]
        [--interval-ms 200] [--out DIR] [--json] [--plot FILE]
    schedsteal-guests report RESULT [--json] [--plot FILE]

The network: each pair's two QEMUs exchange Ethernet frames as UDP
datagrams on the host's loopback address (QEMU's dgram netdev), and
nothing else: no tap device, bridge or namespace is made, and nothing
outside the pair can be reached. The guests set their addresses
(10.9.PAIR.1 drives, .2 serves) themselves. Before each cell every
driver waits until all are ready (a file in the directory each shares
with the host), so the pairs' cells run together. Every guest is killed when
one of them fails, and after the run the harness checks that none of
their processes is left (`leaks` in the result).

Steal time needs the lab QEMU (`make qemu`), multi-threaded TCG on the
host clock. The table: per stress-ng count and mode, the pairs'
transactions per second (tps, higher is better), stress-ng's bogo-ops
per guest and second, the guests' steal, and pref, the CPUs each guest
had preferred over the measured window (time-weighted, sampled every
0.2 s: the governor's size); %chg against `all`, + = better (higher),
with Welch's p over the runs.

Exit status: 0 the run finished (the table is the result), 1 a guest
failed (every guest is stopped), 2 bad usage.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import labcheck, lab, plots, stats, vm
from .guest.settings import AbbenchError
from .cli import ToolParser, read_json
from .guest.guests_probe import MODES, schedule
from .table import format_table

REPO = Path(__file__).resolve().parents[2]
# A guest's share of the host: the static mode keeps CPU 0.
DEFAULT_STATIC = "0"


class GuestsError(Exception):
    pass


@dataclass(frozen=True)
class GuestSpec:
    name: str
    role: str           # "client" or "server"
    pair: int
    addr: str           # address/prefix
    peer: str
    mac: str
    local_port: int     # UDP on 127.0.0.1: this QEMU's end of the link
    remote_port: int

    def qemu_opts(self) -> list[str]:
        """The pair's link: frames as UDP datagrams between the two QEMUs."""
        return [f"-netdev dgram,id=pair,local.type=inet,local.host=127.0.0.1,"
                f"local.port={self.local_port},remote.type=inet,remote.host=127.0.0.1,"
                f"remote.port={self.remote_port}",
                f"-device virtio-net-pci,netdev=pair,mac={self.mac}"]


def free_udp_ports(n: int) -> list[int]:
    """n UDP ports on the loopback address that are free now."""
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def pair_specs(pairs: int, ports: list[int]) -> list[GuestSpec]:
    """Two guests per pair: client 10.9.P.1, server 10.9.P.2."""
    if len(ports) != 2 * pairs:
        raise GuestsError(f"need {2 * pairs} ports, got {len(ports)}")
    out = []
    for p in range(pairs):
        a, b = ports[2 * p], ports[2 * p + 1]
        out.append(GuestSpec(f"client{p}", "client", p, f"10.9.{p}.1/24", f"10.9.{p}.2",
                             f"52:54:00:9a:{p:02x}:01", a, b))
        out.append(GuestSpec(f"server{p}", "server", p, f"10.9.{p}.2/24", f"10.9.{p}.1",
                             f"52:54:00:9a:{p:02x}:02", b, a))
    return out


def _int_list(text: str, flag: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise GuestsError(f"{flag} {text!r}: a comma list of {what}") from None


@dataclass
class Plan:
    """What one run does (the guests' options; checked by check())."""
    pairs: int = 1
    vcpus: int = 3
    static: str = DEFAULT_STATIC
    workers: int = 8
    seconds: float = 20
    settle_s: float = 5
    runs: int = 3
    stress: str = "0,2"
    modes: str = ",".join(MODES)
    interval_ms: int = 200

    def check(self) -> None:
        if not 1 <= self.pairs <= 8:
            raise GuestsError(f"--pairs {self.pairs}: 1 to 8")
        if not 1 <= self.vcpus <= 16:
            raise GuestsError(f"--vcpus {self.vcpus}: 1 to 16")
        static = _int_list(self.static, "--static", "CPU numbers")
        if not static or not all(0 <= c < self.vcpus for c in static):
            raise GuestsError(f"--static {self.static}: CPUs of the guest (0-{self.vcpus - 1})")
        if not 1 <= self.workers <= 512:
            raise GuestsError(f"--workers {self.workers}: 1 to 512")
        if not 0 < self.seconds <= 3600 or not 0 <= self.settle_s <= 600:
            raise GuestsError("--seconds must be within (0, 3600], --settle-s within [0, 600]")
        if not 1 <= self.runs <= 100:
            raise GuestsError(f"--runs {self.runs}: 1 to 100")
        counts = _int_list(self.stress, "--stress", "worker counts")
        if not all(0 <= s <= 64 for s in counts):
            raise GuestsError(f"--stress {self.stress}: 0 to 64 workers")
        bad = [m for m in self.modes.split(",") if m not in MODES]
        if bad or not self.modes:
            raise GuestsError(f"--modes {self.modes}: from {', '.join(MODES)}")
        if not 100 <= self.interval_ms <= 100000:
            raise GuestsError(f"--interval-ms {self.interval_ms}: 100 to 100000")

    def cells(self) -> list:
        return schedule(self.modes.split(","), self.runs,
                        [int(s) for s in self.stress.split(",")])

    def timeout(self) -> float:
        """A client's boot timeout: every cell plus slack for boots."""
        return len(self.cells()) * (self.settle_s + self.seconds + 20) + 900

    def guest_cmd(self, g: GuestSpec, rr: str) -> str:
        cmd = (f"python3 guest/guests_probe.py {g.role} --addr {g.addr} --rr {rr} "
               f"--static {self.static}")
        if g.role == "client":
            cmd += (f" --peer {g.peer} --workers {self.workers} --seconds {self.seconds:g}"
                    f" --settle-s {self.settle_s:g} --runs {self.runs} --stress {self.stress}"
                    f" --modes {self.modes} --barrier \"$SCHEDSTEAL_OUT\"")
        return cmd


def build_rr(outdir: str) -> str:
    """guest/rr.c, built on the host (the guests see the host's files)."""
    out = os.path.join(outdir, "rr")
    try:
        subprocess.run(["gcc", "-O2", "-Wall", "-pthread", "-o", out, str(REPO / "guest" / "rr.c")],
                       check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise GuestsError(f"cannot build guest/rr.c: {getattr(e, 'stderr', '') or e}") from None
    return out


def session_alive(session: int) -> bool:
    try:
        os.killpg(session, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Barrier:
    """Every pair's cell k starts together: each client writes "k" to
    `ready` in the directory it shares with the host before cell k and
    waits for "k" in `go`; this thread writes `go` to every client once
    all of them are ready (guests_probe.barrier). Without it two pairs'
    cells drift apart and one pair's mode overlaps another's."""

    def __init__(self, fleet, clients: list[str]):
        self.fleet, self.clients = fleet, clients
        self.done = threading.Event()
        self.released = -1
        self.thread = threading.Thread(target=self.run, name="guests-barrier", daemon=True)

    @staticmethod
    def _read(path: str) -> int | None:
        try:
            with open(path) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def step(self) -> bool:
        """Release the next cell if every client is ready for it."""
        with self.fleet.lock:
            dirs = [self.fleet.outdirs.get(n) for n in self.clients]
        if any(d is None for d in dirs):
            return False
        k = self.released + 1
        ready = [self._read(os.path.join(d, "ready")) for d in dirs]
        if not all(r is not None and r >= k for r in ready):
            return False
        for d in dirs:
            try:
                with open(os.path.join(d, "go.tmp"), "w") as f:
                    f.write(f"{k}\n")
                os.rename(os.path.join(d, "go.tmp"), os.path.join(d, "go"))
            except OSError:
                pass        # that guest is gone: the fleet stops anyway
        self.released = k
        return True

    def run(self) -> None:
        while not self.done.wait(0.1):
            self.step()


class Fleet:
    """The guests of one run, booted in threads of their own. When one
    fails, `abort` is set and every other guest's monitor kills its
    session; `sessions` keeps every session id for the leak check."""

    def __init__(self):
        self.abort = threading.Event()
        self.sessions: dict[str, int] = {}
        self.outdirs: dict[str, str] = {}
        self.results: dict[str, object] = {}
        self.errors: dict[str, str] = {}
        self.lock = threading.Lock()

    def monitor(self, name: str):
        def watch(session, outdir, stop):
            with self.lock:
                self.sessions[name] = session
                self.outdirs[name] = outdir
            while not stop.wait(0.2):           # the guest's own end, or ...
                if self.abort.is_set():         # ... another guest's failure
                    try:
                        os.killpg(session, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    return {"aborted": True}
            return {"aborted": False}
        return watch

    def boot(self, name: str, fn) -> threading.Thread:
        def body():
            try:
                res = fn(self.monitor(name))
            except Exception as e:  # noqa: BLE001 - every failure stops the fleet
                with self.lock:
                    self.errors[name] = f"{type(e).__name__}: {e}"
                self.abort.set()
                return
            with self.lock:
                self.results[name] = res
            if not res.ok and not (res.monitor or {}).get("aborted"):
                why = ("timed out" if res.timed_out else f"{len(res.splats)} splat(s)"
                       if res.splats else "died" if res.died else f"status {res.status}")
                with self.lock:
                    self.errors[name] = f"the guest {why}: {vm.tail(res.output, 5)}"
                self.abort.set()
        t = threading.Thread(target=body, name=f"guest-{name}", daemon=True)
        t.start()
        return t

    def leaks(self, grace_s: float = 10) -> list[str]:
        """Guests whose session still has a process `grace_s` after the
        run (killed now). A killed QEMU takes a moment to go: its threads
        exit one by one and init reaps it, so the check polls, bounded."""
        left = []
        deadline = time.monotonic() + grace_s
        for name, session in sorted(self.sessions.items()):
            while session_alive(session) and time.monotonic() < deadline:
                time.sleep(0.1)
            if session_alive(session):
                left.append(name)
                try:
                    os.killpg(session, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        return left


def run(kernel: str, qemu: str, plan: Plan, keep: str | None = None,
        commands: dict[str, str] | None = None, progress=None) -> dict:
    """Boot every pair, run the plan, collect each guest's result and
    kernel-log scan; `commands` replaces a guest's command (tests: a guest
    that dies). Returns the result dict (GuestsError only for setup)."""
    plan.check()
    labrec, opts = vm.resolve_lab(qemu, "host", steal_time=True)
    workdir = keep or tempfile.mkdtemp(prefix="schedsteal-guests.")
    os.makedirs(workdir, exist_ok=True)
    rr = build_rr(workdir)
    specs = pair_specs(plan.pairs, free_udp_ports(2 * plan.pairs))
    preset = vm.Preset(f"guest{plan.vcpus}", f"{plan.vcpus} vCPUs, one LLC", 1, plan.vcpus, 1,
                       memory_mb=512)
    append = [f"steal_governor.interval_ms={plan.interval_ms}"]
    fleet = Fleet()
    threads = []
    for g in specs:
        cmd = (commands or {}).get(g.name) or plan.guest_cmd(g, rr)
        timeout = plan.timeout()

        def boot(monitor, g=g, cmd=cmd, timeout=timeout):
            return vm.run(kernel, preset, cmd, timeout=timeout, qemu_opts=opts + g.qemu_opts(),
                          lab=labrec, monitor=monitor, append=append,
                          keep=os.path.join(workdir, g.name))
        if progress:
            progress(f"booting {g.name} ({g.role}, {g.addr}, {plan.vcpus} vCPUs)")
        threads.append(fleet.boot(g.name, boot))
    barrier = Barrier(fleet, [g.name for g in specs if g.role == "client"])
    barrier.thread.start()
    for t in threads:
        t.join()
    barrier.done.set()
    barrier.thread.join()
    out = {"plan": vars(plan), "lab": labrec.record(), "cells_released": barrier.released + 1,
           "guests": {}, "errors": fleet.errors, "leaks": fleet.leaks(), "pairs": []}
    for g in specs:
        res = fleet.results.get(g.name)
        if res is None:
            continue
        objs = [o for _, o in vm.json_objects(res.output.splitlines())]
        out["guests"][g.name] = {"status": res.status, "splats": [s.kind for s in res.splats],
                                 "aborted": bool((res.monitor or {}).get("aborted")),
                                 "result": objs[0] if objs else None}
        if g.role == "client" and objs:
            out["pairs"].append({"pair": g.pair, **objs[0]})
    return out


# --- the table ----------------------------------------------------------------

def cells(result: dict) -> dict:
    """{(stress, mode): {"tps": [...], "bogo": [...], "steal": [...],
    "pref": [...]}}: one value per run (the pairs' tps summed; stress-ng's
    bogo-ops per second of its run, settle included, the mean over every
    guest; steal, the mean over every guest; pref, the guests' mean
    preferred count over the cell, where the probe sampled it)."""
    per_run: dict = {}
    for pair in result["pairs"]:
        for r in pair["rows"]:
            key = (r["stress"], r["mode"], r["run"])
            d = per_run.setdefault(key, {"tps": 0.0, "bogo": [], "steal": [], "pref": []})
            d["tps"] += r["tps"]
            for side in ("client", "server"):
                if r[side]["bogo"] is not None:
                    d["bogo"].append(r[side]["bogo"])
                d["steal"].append(r[side]["steal_pct"])
                mean = (r[side].get("pref") or {}).get("mean")
                if mean is not None:
                    d["pref"].append(mean)
    out: dict = {}
    order = {m: i for i, m in enumerate(MODES)}
    for (s, mode, _), d in sorted(per_run.items(), key=lambda kv: (kv[0][0], order[kv[0][1]],
                                                                    kv[0][2])):
        c = out.setdefault((s, mode), {"tps": [], "bogo": [], "steal": [], "pref": []})
        c["tps"].append(d["tps"])
        if d["bogo"]:
            c["bogo"].append(stats.amean(d["bogo"]))
        c["steal"].append(stats.amean(d["steal"]))
        if d["pref"]:
            c["pref"].append(stats.amean(d["pref"]))
    return out


def summary(result: dict) -> list[dict]:
    rows = []
    table = cells(result)
    for (s, mode), c in table.items():
        base = table.get((s, "all"))
        row = {"stress": s, "mode": mode, "runs": len(c["tps"]),
               "tps": stats.amean(c["tps"]),
               "tps_sd": stats.stddev(c["tps"]) if len(c["tps"]) > 1 else None,
               "bogo": stats.amean(c["bogo"]) if c["bogo"] else None,
               "steal": stats.amean(c["steal"]),
               "pref": stats.amean(c["pref"]) if c["pref"] else None}
        if base and mode != "all":
            row["tps_chg"] = stats.pct_improvement(stats.amean(base["tps"]), row["tps"], True)
            row["tps_p"] = stats.welch_ttest(c["tps"], base["tps"]).p
            if c["bogo"] and base["bogo"]:
                row["bogo_chg"] = stats.pct_improvement(stats.amean(base["bogo"]),
                                                        row["bogo"], True)
                row["bogo_p"] = stats.welch_ttest(c["bogo"], base["bogo"]).p
        rows.append(row)
    return rows


def governor_vs_static(result: dict) -> list[tuple]:
    """(stress, %chg of the governor's tps against the static set's, p)
    for each stress count that ran both: the issue's goal, within 5%."""
    table = cells(result)
    out = []
    for (s, mode), c in table.items():
        st = table.get((s, "static"))
        if mode == "governor" and st:
            out.append((s, stats.pct_improvement(stats.amean(st["tps"]),
                                                 stats.amean(c["tps"]), True),
                        stats.welch_ttest(c["tps"], st["tps"]).p))
    return out


def _f(v, fmt):
    return "-" if v is None else format(v, fmt)


def format_summary(result: dict) -> str:
    p = result["plan"]
    head = (f"{p['pairs']} pair(s) of {p['vcpus']}-vCPU guests, {p['workers']} rr workers per "
            f"pair, {p['seconds']:g} s measured after {p['settle_s']:g} s, {p['runs']} runs a "
            f"cell, static keeps CPU(s) {p['static']}, governor interval {p['interval_ms']} ms")
    rows = [("stress", "mode", "runs", "tps", "sd", "%chg", "p", "bogo/s", "%chg", "p",
             "steal%", "pref")]
    for r in summary(result):
        rows.append((r["stress"], r["mode"], r["runs"], _f(r["tps"], ".1f"), _f(r["tps_sd"], ".1f"),
                     _f(r.get("tps_chg"), "+.1f"), _f(r.get("tps_p"), ".3f"),
                     _f(r["bogo"], ".0f"), _f(r.get("bogo_chg"), "+.1f"),
                     _f(r.get("bogo_p"), ".3f"), _f(r["steal"], ".1f"),
                     _f(r["pref"], ".2f")))
    lines = [head, "", *format_table(rows, left=(1,)), "",
             "tps: transactions/s of all pairs; bogo/s: stress-ng bogo-ops per guest and "
             "second; %chg against mode all, + = higher (better); p: Welch's t-test over runs; "
             "pref: preferred CPUs per guest, time-weighted over the measured window"]
    for s, chg, p_ in governor_vs_static(result):
        lines.append(f"governor against static, stress {s}: {chg:+.1f}% tps "
                     f"(p {_f(p_, '.3f')}; + = the governor's higher)")
    if result.get("errors"):
        lines.append("errors: " + "; ".join(f"{k}: {v}" for k, v in result["errors"].items()))
    lines.append("left behind: " + (", ".join(result["leaks"]) if result["leaks"] else "nothing"))
    return "\n".join(lines)


def plot(result: dict, path: str) -> None:
    plt = plots.pyplot()
    rows = summary(result)
    stresses = sorted({r["stress"] for r in rows})
    fig, axes = plt.subplots(1, len(stresses), figsize=(5 * len(stresses), 4), squeeze=False)
    for ax, s in zip(axes[0], stresses):
        rs = [r for r in rows if r["stress"] == s]
        ax.bar([r["mode"] for r in rs], [r["tps"] for r in rs],
               yerr=[r["tps_sd"] or 0 for r in rs], color="tab:blue", capsize=4)
        ax.set_title(f"rr{' + %d stress-ng' % s if s else ' alone'}")
        ax.set_ylabel("transactions/s (all pairs)")
        for i, r in enumerate(rs):
            ax.annotate(f"steal {r['steal']:.0f}%", (i, r["tps"]), ha="center",
                        va="bottom", fontsize=8)
    fig.tight_layout()
    plots.save(plt, fig, path)


# --- the command ---------------------------------------------------------------

class _Parser(ToolParser):
    tool = "schedsteal-guests"


def make_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="schedsteal-guests", description=__doc__.split("\n\n")[0],
                epilog=__doc__.split("\n\n", 1)[1].split("Exit status")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run", help="boot the pairs and run the experiment")
    labcheck.add_lab_args(r)
    d = Plan()
    r.add_argument("--pairs", type=int, default=d.pairs)
    r.add_argument("--vcpus", type=int, default=d.vcpus, help="vCPUs per guest")
    r.add_argument("--static", default=d.static, help="CPUs mode static keeps (comma list)")
    r.add_argument("--workers", type=int, default=d.workers, help="rr connections per pair")
    r.add_argument("--seconds", type=float, default=d.seconds, help="measured seconds a cell")
    r.add_argument("--settle-s", type=float, default=d.settle_s,
                   help="seconds of load before each measured window")
    r.add_argument("--runs", type=int, default=d.runs, help="runs of each mode")
    r.add_argument("--stress", default=d.stress,
                   help="stress-ng workers per guest, one variant each (0: rr alone)")
    r.add_argument("--modes", default=d.modes)
    r.add_argument("--interval-ms", type=int, default=d.interval_ms,
                   help="the steal governor's interval_ms")
    r.add_argument("--out", metavar="DIR", help="keep the guests' files and result.json here")
    for q in (r, sub.add_parser("report", help="the table (and plot) of a saved result")):
        if q is not r:
            q.add_argument("result", help="result.json of a run")
        q.add_argument("--json", action="store_true", help="print JSON instead of a table")
        q.add_argument("--plot", metavar="FILE", help="write the plot (png, svg, pdf, jpg)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    err = "schedsteal-guests: error:"
    try:
        if args.plot:
            plots.plot_format(args.plot)
        if args.action == "report":
            result = read_json(args.result, GuestsError)
            try:
                summary(result)
            except (ValueError, KeyError, TypeError) as e:
                raise GuestsError(f"{args.result}: not a schedsteal-guests result ({e})") from None
        else:
            plan = Plan(args.pairs, args.vcpus, args.static, args.workers, args.seconds,
                        args.settle_s, args.runs, args.stress, args.modes, args.interval_ms)
            plan.check()
            try:
                qemu = labcheck.resolve(args.kernel, args.qemu)
            except labcheck.LabCheckError as e:
                raise GuestsError(str(e)) from None
            out = args.out or tempfile.mkdtemp(prefix="schedsteal-guests.")
            try:
                result = run(args.kernel, qemu.binary, plan, keep=out,
                             progress=lambda m: print(f"schedsteal-guests: {m}",
                                                      file=sys.stderr, flush=True))
            except (vm.VMError, lab.LabError) as e:
                raise GuestsError(str(e)) from None
            with open(os.path.join(out, "result.json"), "w") as f:
                json.dump(result, f)
            print(f"schedsteal-guests: result in {out}/result.json", file=sys.stderr)
            if result["errors"] or result["leaks"]:
                print(format_summary(result) if result["pairs"] else
                      "schedsteal-guests: FAIL: " + "; ".join(
                          f"{k}: {v}" for k, v in result["errors"].items()), file=sys.stderr)
                return 1
        if args.plot:
            plot(result, args.plot)
    except (GuestsError, AbbenchError) as e:
        print(f"{err} {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"summary": summary(result),
                          "governor_vs_static": [
                              {"stress": s, "tps_chg": c, "p": p_}
                              for s, c, p_ in governor_vs_static(result)],
                          "errors": result["errors"], "leaks": result["leaks"]}))
    else:
        print(format_summary(result))
    return 0
