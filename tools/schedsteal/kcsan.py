"""schedsteal-kcsan: sort a kernel log's KCSAN reports into the series'
and the base kernel's.

A KCSAN report ("BUG: KCSAN: data-race in A / B") names two accesses,
each with its stack. The report is the series' when one of the first
FRAMES frames (default 2: the function that made the access and its
caller, since inlined helpers are shown as their caller) of either access
is a function the series adds or changes; otherwise it is the base's.
"Changes" is read from the patches: every function a patch defines on a
`+` line, and every function a hunk header names as the context of a
change. That is a superset (a hunk at the top of a function names the
function before it), which errs towards blaming the series.

usage: schedsteal-kcsan [--patches DIR] [--frames N]
                        [--vmlinux FILE --tree DIR] [--json] LOG

With --vmlinux (built with line tables) and --tree (the git tree it was
built from: the base commit tagged "base", the series as commits on it),
the attribution is by line instead: each access's first frame is mapped
to its inline chain (scripts/faddr2line, the return address less one);
the access's line is the innermost one outside the generic headers
(include/, arch/*/include/: READ_ONCE() or cpumask_test_cpu() act for
their caller); when that line is in an out-of-line generic helper (lib/:
find_next_and_bit() under a cpumask walk on a kernel with many CPUs), the
caller's frame is taken instead, and so on; and the report is the
series' when `git blame` says a series commit wrote that line. A base
helper inlined into a line the series changed (sched_idle_rq() under
sched_idle_cpu()) stays the base's. That is exact where the function
rule is not: the series changes large base functions
(select_task_rq_fair, sched_balance_newidle) whose own races are the
base's.

The table lists one line per distinct race (the report's title), with its
count, owner (series or base) and the frames (or lines) that decided it. Exit status:
0 when no report is the series', 1 when one is, 2 on bad input (a missing
or unreadable file, a log with no kernel log in it, no patches).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from pathlib import Path

from .cli import ToolParser
from .table import format_table
from .vm import VMError, kernel_text, read_kernel_log

TOOL = "schedsteal-kcsan"
REPO = Path(__file__).resolve().parents[2]
PATCHES = REPO / "patches"

_TITLE = re.compile(r"BUG: KCSAN: (data-race|assert: race) in (.+?)\s*$")
_ACCESS = re.compile(r"^(?:race at unknown origin, with )?"
                     r"(read|write|read-write|assert no accesses|assert no writes)"
                     r"(?: \((?:marked|reordered|marked, reordered)\))?"
                     r" to 0x[0-9a-f]+ of (\d+) bytes? "
                     r"by (task \d+|interrupt) on cpu (\d+):")
_FRAME = re.compile(r"^\s*(?:\?\s*)?(([A-Za-z_][\w.]*)\+0x[0-9a-f]+/0x[0-9a-f]+)")
_END = re.compile(r"^={20,}\s*$")
# C function definitions a patch adds: type and name at column 0, an
# opening parenthesis, and no semicolon (a declaration) on the line.
_DEF = re.compile(r"^\+(?!\s)(?!(?:if|for|while|switch|return|else|do|case|goto)\b)"
                  r"[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\((?!.*;\s*$)")
_HUNK = re.compile(r"^@@ [^@]+ @@ (.*)$")
_CTX_NAME = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


class KcsanError(Exception):
    pass


@dataclasses.dataclass
class Access:
    op: str            # read, write, read-write, ...
    size: int
    context: str       # "task 123" or "interrupt"
    cpu: int
    frames: list[str]
    raw: list[str] = dataclasses.field(default_factory=list)  # "func+0x1a/0x90"


@dataclasses.dataclass
class Report:
    kind: str          # data-race, assert: race, ...
    title: str         # "A / B"
    lineno: int
    accesses: list[Access]

    def top(self, n: int) -> list[str]:
        return [f for a in self.accesses for f in a.frames[:n]]


def parse_reports(text: str) -> list[Report]:
    """Every KCSAN report in a kernel log, in order."""
    reports, cur, acc = [], None, None
    for n, raw in enumerate(text.splitlines(), 1):
        line = kernel_text(raw).rstrip()
        m = _TITLE.search(line)
        if m:
            cur = Report(m[1], m[2], n, [])
            reports.append(cur)
            acc = None
            continue
        if cur is None:
            continue
        if _END.match(line) or line.startswith("Reported by Kernel Concurrency Sanitizer"):
            cur, acc = None, None
            continue
        m = _ACCESS.match(line.strip())
        if m:
            acc = Access(m[1], int(m[2]), m[3], int(m[4]), [])
            cur.accesses.append(acc)
            continue
        if not line.strip():
            acc = None
            continue
        m = _FRAME.match(line)
        if m and acc is not None:
            acc.frames.append(m[2].split(".")[0])
            acc.raw.append(m[1])
    return reports


def series_functions(patches: Path = PATCHES) -> set[str]:
    """The functions the series' patches define or change (see the module
    docstring); a KcsanError when there is no patch to read."""
    files = sorted(Path(patches).rglob("*.patch"))
    files = [f for f in files if not f.name.startswith("0000-")]
    if not files:
        raise KcsanError(f"no patches under {patches}")
    names: set[str] = set()
    for f in files:
        src = None
        for line in f.read_text(errors="replace").splitlines():
            if line.startswith("+++ "):
                src = line[4:]
                continue
            if not src or not src.endswith((".c", ".h")):
                continue
            m = _DEF.match(line)
            if m:
                names.add(m[1])
                continue
            m = _HUNK.match(line)
            if m:
                ctx = _CTX_NAME.findall(m[1])
                if ctx:
                    names.add(ctx[0])
    return names


_AT = re.compile(r"^\s*(?:\(inlined by\)\s*)?(\S+) at (\S+?):(\d+)")


class LineOwner:
    """Who wrote the source line of a frame: faddr2line over vmlinux for
    the inline chain, git blame in the tree for each of its lines."""

    def __init__(self, vmlinux: str, tree: str, run=None):
        import subprocess
        self.vmlinux, self.tree = str(vmlinux), Path(tree)
        self._run = run or (lambda cmd: subprocess.run(
            cmd, capture_output=True, text=True, check=False).stdout)
        if not Path(self.vmlinux).is_file():
            raise KcsanError(f"no vmlinux at {self.vmlinux}")
        base = self._run(["git", "-C", str(self.tree), "rev-parse", "base"]).strip()
        if not re.fullmatch(r"[0-9a-f]{40}", base):
            raise KcsanError(f"{self.tree}: not a tree with a 'base' tag")
        self.base = base
        self._chains: dict[str, list[tuple[str, int]]] = {}
        self._blame: dict[str, dict[int, str]] = {}

    def chain(self, raw: str) -> list[tuple[str, int]]:
        """(file, line) of the code at a frame, innermost first. The
        offset is a return address: one less is the call itself."""
        if raw not in self._chains:
            m = re.fullmatch(r"(.+)\+0x([0-9a-f]+)/(0x[0-9a-f]+)", raw)
            off = max(int(m[2], 16) - 1, 0)
            out = self._run([str(self.tree / "scripts" / "faddr2line"), self.vmlinux,
                             f"{m[1]}+{off:#x}/{m[3]}"])
            prefix = str(self.tree.resolve()) + "/"
            chain = []
            for line in out.splitlines():
                a = _AT.match(line)
                if a:
                    path = a[2].replace(prefix, "")
                    chain.append((path, int(a[3])))
            self._chains[raw] = chain
        return self._chains[raw]

    def commit(self, path: str, line: int) -> str | None:
        if path not in self._blame:
            out = self._run(["git", "-C", str(self.tree), "blame", "-l", "-s", "HEAD", "--", path])
            owners = {}
            for n, ln in enumerate(out.splitlines(), 1):
                m = re.match(r"^(\^?)([0-9a-f]{39,40})\b", ln)
                if m:
                    owners[n] = self.base if m[1] else m[2]
            self._blame[path] = owners
        return self._blame[path].get(line)

    def access_line(self, raw: str) -> tuple[str, int] | None:
        """The line that made the access: the innermost of the chain that
        is not in a generic header (include/, arch/*/include/: READ_ONCE,
        cpumask_test_cpu and the like act for their caller)."""
        chain = self.chain(raw)
        for path, n in chain:
            if not re.match(r"(?:include/|arch/[^/]+/include/)", path):
                return path, n
        return chain[-1] if chain else None

    def access_frame(self, raws) -> str:
        """The frame whose code made the access (see access_at())."""
        return self.access_at(raws)[0]

    def access_at(self, raws) -> tuple[str, tuple[str, int] | None]:
        """The frame whose code made the access, and its access line: the
        first frame, unless its access line is in an out-of-line generic
        helper (lib/: the find_bit and bitmap functions a cpumask operation
        calls on a kernel with many CPUs); then its caller, and so on. A
        series line that calls such a helper is where the access was asked
        for."""
        raws = [raws] if isinstance(raws, str) else list(raws)
        for raw in raws:
            at = self.access_line(raw)
            if not (at and at[0].startswith("lib/")):
                return raw, at
        return raws[0], self.access_line(raws[0])

    def series_lines(self, raws) -> list[str]:
        """[the access line] when a series commit wrote it, else []; raws:
        an access's frames, innermost first (see access_frame()), or one
        frame. A line that cannot be resolved or blamed (no line tables,
        a path outside the tree, a generated file) counts as the series':
        the safe side."""
        raw, at = self.access_at(raws)
        if not at:
            return [f"{raw}: no source line"]
        c = self.commit(*at)
        if c is None:
            return [f"{at[0]}:{at[1]}: not blamed"]
        return [f"{at[0]}:{at[1]}"] if c != self.base else []


def classify(reports: list[Report], funcs: set[str], frames: int = 2,
             lines: LineOwner | None = None) -> list[dict]:
    """One row per distinct race (kind and title): count, owner, and what
    decided it: the series' functions among the top frames, or, with
    `lines`, the series' line that made each access (LineOwner)."""
    rows: dict[tuple, dict] = {}
    for r in reports:
        key = (r.kind, r.title)
        if lines is not None:
            hits = [x for a in r.accesses if a.raw for x in lines.series_lines(a.raw)]
        else:
            hits = [f for f in r.top(frames) if f in funcs]
        row = rows.setdefault(key, {"kind": r.kind, "title": r.title, "count": 0,
                                    "owner": "base", "series_frames": [],
                                    "first_line": r.lineno,
                                    "frames": [a.frames[:frames] for a in r.accesses]})
        row["count"] += 1
        if hits and row["owner"] == "base":
            row["owner"] = "series"
            row["series_frames"] = sorted(set(hits))
    return sorted(rows.values(), key=lambda x: (x["owner"] != "series", x["first_line"]))


def render(rows: list[dict]) -> str:
    if not rows:
        return "no KCSAN reports"
    out = [f"{sum(r['count'] for r in rows)} KCSAN reports, {len(rows)} distinct; "
           f"{sum(r['owner'] == 'series' for r in rows)} distinct in the series' functions"]
    table = [("owner", "count", "kind", "race (access 1 / access 2)", "series functions or lines")]
    for r in rows:
        table.append((r["owner"], r["count"], r["kind"], r["title"],
                      ", ".join(r["series_frames"]) or "-"))
    out += format_table(table, left=(0, 2, 3, 4))
    return "\n".join(out)


def main(argv=None) -> int:
    p = ToolParser(prog=TOOL, description=__doc__.split("\n\n")[0])
    p.add_argument("log", help="a kernel log (the guest's dmesg or console)")
    p.add_argument("--patches", default=str(PATCHES), metavar="DIR",
                   help="the series' patches (default: this checkout's patches/)")
    p.add_argument("--frames", type=int, default=2, metavar="N",
                   help="frames of each access that may name a series function (default 2)")
    p.add_argument("--vmlinux", metavar="FILE",
                   help="the kernel's vmlinux with line tables: attribute by source line")
    p.add_argument("--tree", metavar="DIR",
                   help="with --vmlinux: the git tree it was built from (tag 'base')")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = p.parse_args(argv)
    if args.frames < 1:
        p.error("--frames must be 1 or more")
    if bool(args.vmlinux) != bool(args.tree):
        p.error("--vmlinux and --tree go together")
    try:
        try:
            text = read_kernel_log(args.log)
        except OSError as exc:
            raise KcsanError(f"cannot read {args.log}: {exc.strerror or exc}") from None
        except VMError as exc:
            raise KcsanError(str(exc)) from None
        lines = LineOwner(args.vmlinux, args.tree) if args.vmlinux else None
        rows = classify(parse_reports(text), series_functions(Path(args.patches)),
                        args.frames, lines)
    except KcsanError as exc:
        print(f"{TOOL}: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(rows, indent=2) if args.json else render(rows))
    return 1 if any(r["owner"] == "series" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
