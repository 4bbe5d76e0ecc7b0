"""Guests that talk to each other (guest side): ``python3 guest/guests_probe.py``.

One guest of a pair serves, the other drives; schedsteal-guests
(tools/schedsteal/guests.py) boots them and connects them with a virtual
network of their own. Each prints one JSON object.

    guests_probe.py server --addr 10.9.0.2/24 --rr BIN [--static 0]
        Bring the network up, serve guest/rr.c's request/response load,
        and obey the client's control connection (one JSON line per
        request, one per answer) until it says quit:
          {"op": "mode", "mode": M}       all | static | governor
          {"op": "start", "stress": N, "seconds": S}
          {"op": "mark"}                  the measured window starts
          {"op": "finish"}                -> bogo-ops, steal %, preferred,
                                             the preferred count over the cell
          {"op": "quit"}
    guests_probe.py client --addr 10.9.0.1/24 --peer 10.9.0.2 --rr BIN
                           [--workers 8] [--seconds 20] [--settle-s 5]
                           [--runs 3] [--modes all,static,governor]
                           [--stress 0,2] [--static 0] [--barrier DIR]
        The experiment: for each stress-ng count (0: rr alone), for each
        run, each mode in turn (the order reversed every other run: A B C,
        C B A, ...): both guests switch to the mode, start --stress
        stress-ng workers (`--cpu N --cpu-load 99 --cpu-method
        matrixprod`, the design's), run rr for --settle-s unmeasured, then
        --seconds measured; one row per cell with transactions per second,
        each guest's bogo-ops and steal, and how many CPUs each guest had
        preferred over the measured window (sampled every PREF_POLL_S:
        the governor's choice interval by interval, pref_summary()).

Modes: all = every CPU, the governor off; static = only --static CPUs
preferred (the rest parked by hand), the governor off; governor = every
CPU, the steal governor on (its defaults), which finds the size itself.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time

from .. import schedstat
from ..cpulist import format_cpulist, parse_cpulist
from . import kernel, print_result

RR_PORT = 5001
CTL_PORT = 5000
GOVERNOR_ENABLED = "/sys/module/steal_governor/parameters/enabled"
MODES = ("all", "static", "governor")
# Bounded waits for the peer, in 0.2 s polls: a peer guest that boots
# late is still booting; one that never answers ends the run.
PEER_TRIES = 1500
# An answer on the control connection, at most.
RPC_TIMEOUT_S = 600


class ProbeError(Exception):
    pass


def net_up(addr: str) -> str:
    """Bring up the one virtio network interface with `addr`; its name."""
    names = sorted(n for n in os.listdir("/sys/class/net") if n != "lo")
    if not names:
        raise ProbeError("no network interface (is CONFIG_VIRTIO_NET in the kernel?)")
    dev = names[0]
    for cmd in (["ip", "link", "set", "lo", "up"], ["ip", "addr", "add", addr, "dev", dev],
                ["ip", "link", "set", dev, "up"]):
        subprocess.run(cmd, check=True)
    return dev


def set_mode(mode: str, static: str) -> str:
    """Switch this guest to a mode; the preferred CPUs after it."""
    if mode not in MODES:
        raise ProbeError(f"unknown mode {mode!r}")
    have_gov = os.path.exists(GOVERNOR_ENABLED)
    if have_gov:
        kernel.write(GOVERNOR_ENABLED, "N\n")   # unparks what it parked
    online = kernel.online_cpus()
    if mode == "static":
        keep = set(parse_cpulist(static))
        kernel.set_parked(format_cpulist([c for c in online if c not in keep]))
    else:
        kernel.set_parked("")
    if mode == "governor":
        if not have_gov:
            raise ProbeError("mode governor: this kernel has no steal governor")
        kernel.write(GOVERNOR_ENABLED, "Y\n")
    return kernel.preferred()


STRESS = ["stress-ng", "--cpu-load", "99", "--cpu-method", "matrixprod", "--metrics-brief"]
BOGO_RE = re.compile(r"bogo-ops-per-second-real-time:\s*([\d.]+)")


def start_stress(workers: int, seconds: float, yaml: str):
    if not workers:
        return None
    # Its temporary files go beside the YAML: the guest's working
    # directory (the repository, over 9p) is not writable.
    workdir = os.path.dirname(yaml)
    with open(os.path.join(workdir, "stress.log"), "w") as log:
        return subprocess.Popen([*STRESS, "--cpu", str(workers), "-t", f"{seconds:g}s",
                                 "--temp-path", workdir, "--yaml", yaml],
                                stdout=log, stderr=subprocess.STDOUT, cwd=workdir)


def finish_stress(proc, yaml: str) -> float | None:
    """Wait for stress-ng and return its bogo-ops per second of its whole
    run, every worker together (None: none ran)."""
    if proc is None:
        return None
    rc = proc.wait()
    try:
        with open(yaml) as f:
            m = BOGO_RE.search(f.read())
    except OSError:
        m = None
    if rc or not m:
        with open(os.path.join(os.path.dirname(yaml), "stress.log")) as f:
            log = f.read().strip().splitlines()[-3:]
        raise ProbeError(f"stress-ng (exit {rc}) gave no bogo-ops: {' / '.join(log)}")
    return float(m[1])


# How often a cell samples the preferred count (the governor's interval
# in these runs is 200 ms or more).
PREF_POLL_S = 0.2


def pref_summary(samples: list) -> dict:
    """From (t, count) samples of the preferred count: the time-weighted
    mean count, the seconds spent at each count (each sample's count
    holds until the next sample), and how many times it changed."""
    if not samples:
        return {"mean": None, "seconds": {}, "changes": 0}
    secs: dict = {}
    for (t0, c), (t1, _) in zip(samples, samples[1:]):
        secs[c] = secs.get(c, 0.0) + (t1 - t0)
    total = sum(secs.values())
    mean = sum(c * v for c, v in secs.items()) / total if total > 0 else samples[0][1]
    return {"mean": round(mean, 2),
            "seconds": {str(c): round(v, 2) for c, v in sorted(secs.items())},
            "changes": sum(a[1] != b[1] for a, b in zip(samples, samples[1:]))}


class PrefSampler(threading.Thread):
    """Samples the preferred count every PREF_POLL_S until stopped."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples: list = []
        self.done = threading.Event()
        self.t0 = time.monotonic()

    def run(self):
        while not self.done.is_set():
            self.samples.append((round(time.monotonic() - self.t0, 3),
                                 len(parse_cpulist(kernel.preferred()))))
            self.done.wait(PREF_POLL_S)

    def stop(self, since: float = 0.0) -> dict:
        """Stop; the summary of the samples taken `since` s after the start."""
        self.done.set()
        self.join()
        return pref_summary([x for x in self.samples if x[0] >= since])


def steal_pct(before: dict, after: dict) -> float:
    """The guest's steal over the window, as % of all its CPU time."""
    tot = sum(after["cpu"].values()) - sum(before["cpu"].values())
    return round(100.0 * (after["cpu"]["steal"] - before["cpu"]["steal"]) / max(tot, 1), 2)


def proc_stat() -> dict:
    return schedstat.parse_proc_stat(kernel.read(kernel.STAT))


class Cell:
    """One guest's side of a measured cell: stress-ng and the steal window."""

    def __init__(self, workdir: str):
        self.yaml = os.path.join(workdir, "stress.yaml")
        self.proc = None
        self.stat = None
        self.sampler = None
        self.since = 0.0

    def start(self, stress: int, seconds: float):
        self.proc = start_stress(stress, seconds, self.yaml)
        self.stat = proc_stat()
        self.sampler, self.since = PrefSampler(), 0.0
        self.sampler.start()

    def mark(self):
        """The measured window starts: steal and the preferred count from here."""
        self.stat = proc_stat()
        self.since = time.monotonic() - self.sampler.t0

    def finish(self) -> dict:
        after = proc_stat()
        pref = self.sampler.stop(self.since) if self.sampler else pref_summary([])
        self.sampler = None
        return {"bogo": finish_stress(self.proc, self.yaml),
                "steal_pct": steal_pct(self.stat, after),
                "preferred": kernel.preferred(), "pref": pref}


def rpc(f, req: dict) -> dict:
    f.write(json.dumps(req) + "\n")
    f.flush()
    line = f.readline()
    if not line:
        raise ProbeError(f"the server went away (request {req})")
    ans = json.loads(line)
    if "error" in ans:
        raise ProbeError(f"the server refused {req}: {ans['error']}")
    return ans


def cmd_server(args) -> int:
    kernel.enable_schedstats()
    net_up(args.addr)
    rr = subprocess.Popen([args.rr, "server", str(RR_PORT)], stdout=subprocess.PIPE, text=True)
    if not rr.stdout.readline().startswith("listening"):
        raise ProbeError("rr server did not start")
    workdir = tempfile.mkdtemp(prefix="guests-")
    log = []
    try:
        with socket.create_server(("", CTL_PORT)) as srv:
            conn, _ = srv.accept()
            with conn, conn.makefile("rw") as f:
                cell = Cell(workdir)
                for line in f:
                    req = json.loads(line)
                    op = req.get("op")
                    try:
                        if op == "mode":
                            ans = {"preferred": set_mode(req["mode"], args.static)}
                        elif op == "start":
                            cell.start(req["stress"], req["seconds"])
                            ans = {"ok": True}
                        elif op == "mark":
                            cell.mark()
                            ans = {"ok": True}
                        elif op == "finish":
                            ans = cell.finish()
                        elif op == "quit":
                            ans = {"ok": True}
                        else:
                            ans = {"error": f"unknown op {op!r}"}
                    except (ProbeError, OSError) as e:
                        ans = {"error": str(e)}
                    log.append({"req": req, "ans": ans})
                    f.write(json.dumps(ans) + "\n")
                    f.flush()
                    if op == "quit":
                        break
    finally:
        rr.send_signal(signal.SIGTERM)
        rr.wait()
        set_mode("all", args.static)
    return print_result({"role": "server", "requests": len(log),
                         "errors": [e for e in log if "error" in e["ans"]]})


def connect_peer(peer: str) -> socket.socket:
    for _ in range(PEER_TRIES):
        try:
            sock = socket.create_connection((peer, CTL_PORT), timeout=5)
        except OSError:
            time.sleep(0.2)     # the peer is still booting: poll, bounded
            continue
        # The connect's 5 s would also bound every answer; a loaded host
        # (4 guests on 2 cores) takes longer to switch a mode or to reap
        # stress-ng. The harness's boot timeout bounds the whole run.
        sock.settimeout(RPC_TIMEOUT_S)
        return sock
    raise ProbeError(f"the server {peer} never answered on port {CTL_PORT}")


def barrier(outdir: str, k: int, tries: int = RPC_TIMEOUT_S * 10) -> None:
    """Cell k starts in every pair at once: say "ready k" in the directory
    the host shares with this guest and wait (bounded) until the host,
    once every client is ready, writes "go k" there (guests.Barrier)."""
    tmp = os.path.join(outdir, "ready.tmp")
    with open(tmp, "w") as f:
        f.write(f"{k}\n")
    os.rename(tmp, os.path.join(outdir, "ready"))
    for _ in range(tries):
        try:
            with open(os.path.join(outdir, "go")) as f:
                if int(f.read().strip() or -1) >= k:
                    return
        except (OSError, ValueError):
            pass
        time.sleep(0.1)         # the host's poll is 0.1 s too: bounded
    raise ProbeError(f"no go for cell {k} from the host")


RR_RE = re.compile(r"transactions (\d+) seconds ([\d.]+) workers (\d+) tps ([\d.]+)")


def parse_rr(text: str) -> dict:
    m = RR_RE.search(text)
    if not m:
        raise ProbeError(f"no rr result in {text!r}")
    return {"transactions": int(m[1]), "seconds": float(m[2]), "workers": int(m[3]),
            "tps": float(m[4])}


def run_rr(args, seconds: float) -> dict:
    out = subprocess.run([args.rr, "client", args.peer, str(RR_PORT), str(args.workers),
                          f"{seconds:g}"], capture_output=True, text=True, check=False)
    if out.returncode:
        raise ProbeError(f"rr client: {out.stderr.strip()}")
    return parse_rr(out.stdout)


def schedule(modes: list[str], runs: int, stress: list[int]) -> list[tuple[int, int, str]]:
    """(stress, run, mode) in the order they run: each stress count in
    turn; in it, the modes' order reversed every other run."""
    out = []
    for s in stress:
        for r in range(runs):
            order = modes if r % 2 == 0 else modes[::-1]
            out += [(s, r, m) for m in order]
    return out


def cmd_client(args) -> int:
    kernel.enable_schedstats()
    net_up(args.addr)
    modes = args.modes.split(",")
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise ProbeError(f"unknown mode(s) {bad}")
    stress = [int(s) for s in args.stress.split(",")]
    workdir = tempfile.mkdtemp(prefix="guests-")
    rows = []
    sock = connect_peer(args.peer)
    with sock, sock.makefile("rw") as f:
        for k, (s, r, mode) in enumerate(schedule(modes, args.runs, stress)):
            if args.barrier:
                barrier(args.barrier, k)
            server_pref = rpc(f, {"op": "mode", "mode": mode})["preferred"]
            client_pref = set_mode(mode, args.static)
            total = args.settle_s + args.seconds
            rpc(f, {"op": "start", "stress": s, "seconds": total})
            cell = Cell(workdir)
            cell.start(s, total)
            if args.settle_s:
                run_rr(args, args.settle_s)
            # The measured window: steal and the preferred count from here
            # (start() marked the settle's), in both guests.
            cell.mark()
            rpc(f, {"op": "mark"})
            res = run_rr(args, args.seconds)
            mine = cell.finish()
            theirs = rpc(f, {"op": "finish"})
            rows.append({"stress": s, "run": r, "mode": mode, **res,
                         "preferred_at_start": [client_pref, server_pref],
                         "client": mine, "server": theirs})
            print(f"guests: stress {s} run {r} {mode}: {res['tps']:.1f} tps, "
                  f"steal {mine['steal_pct']}/{theirs['steal_pct']}%", flush=True)
        rpc(f, {"op": "quit"})
    set_mode("all", args.static)
    return print_result({"role": "client", "workers": args.workers, "seconds": args.seconds,
                         "settle_s": args.settle_s, "static": args.static, "rows": rows})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="guests_probe.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="role", required=True)
    for name in ("server", "client"):
        q = sub.add_parser(name)
        q.add_argument("--addr", required=True, help="this guest's address/prefix")
        q.add_argument("--rr", required=True, help="guest/rr.c built on the host")
        q.add_argument("--static", default="0", help="the CPUs mode static keeps")
    c = sub.choices["client"]
    c.add_argument("--peer", required=True)
    c.add_argument("--workers", type=int, default=8)
    c.add_argument("--seconds", type=float, default=20)
    c.add_argument("--settle-s", type=float, default=5)
    c.add_argument("--runs", type=int, default=3)
    c.add_argument("--modes", default=",".join(MODES))
    c.add_argument("--stress", default="0,2")
    c.add_argument("--barrier", metavar="DIR", default="",
                   help="wait before each cell until the host says go in DIR "
                        "(the directory it shares with this guest; pairs in step)")
    args = p.parse_args(argv)
    try:
        return (cmd_server if args.role == "server" else cmd_client)(args)
    except ProbeError as e:
        print(f"guests_probe: error: {e}", flush=True)
        return 1
