"""Tests for kernelab: the boot order, the merge of the boots' abbench
documents, the report, and the run loop with the boot replaced by a stub
that writes what a guest's ``abbench run`` (A alone) would."""

import json
import os
import types
from pathlib import Path

import pytest
from schedsteal import kernelab


def boot_doc(values, params=(2,), release="6.12.117"):
    """What one boot's abbench run --a X (no --b) writes."""
    runs = [{"param": p, "setting": "A", "index": i, "value": v, "position": n,
             "recording": None}
            for p in params for n, (i, v) in enumerate(enumerate(values))]
    return {"format": "schedsteal-abbench", "format_version": 1, "complete": True,
            "workload": "hackbench-process-pipe", "unit": "s", "higher_is_better": False,
            "mean_kind": "Amean", "param_key": "g", "param_title": "groups",
            "params": list(params), "sides": "A",
            "settings": {"A": {"name": "x", "spec": "none"},
                         "B": {"name": "(not run)", "spec": None}},
            "runs": runs, "warmup": [], "host": {"release": release}, "topology": None}


def test_boot_order_alternates_pairs():
    assert kernelab.boot_order(3) == [(0, "A"), (0, "B"), (1, "B"), (1, "A"),
                                      (2, "A"), (2, "B")]


def make_args(tmp_path, **kw):
    a, b = tmp_path / "a.bzImage", tmp_path / "b.bzImage"
    a.write_bytes(b"A")
    b.write_bytes(b"B")
    args = dict(a_kernel=str(a), b_kernel=str(b), a_name="stock", b_name="series",
                a_setting="none", b_setting="feat:NO_STEAL", preset="smp2", boots=2,
                runs=3, warmup=1, workload="hackbench-process-pipe", param=["2"],
                loops=100, no_schedstat=False, qemu_opts=[], timeout=100.0, run_timeout=60.0,
                qemu="stock", clock=None, quantum=None, steal_time=None,
                out=str(tmp_path / "out"))
    args.update(kw)
    return types.SimpleNamespace(**args)


class StubBoot:
    """vm.run's stand-in: kernel A's runs take 1.0-1.2 s, B's 2.0-2.2 s,
    plus 0.5 s more in every later pair (a drifting host)."""

    def __init__(self, fail_at=None, splat_at=None):
        self.calls, self.fail_at, self.splat_at = [], fail_at, splat_at

    def __call__(self, kernel, preset, cmd, timeout, keep, qemu_opts, lab):
        n = len(self.calls)
        self.calls.append((kernel, preset, cmd))
        self.qemu_opts, self.lab = qemu_opts, lab
        os.makedirs(keep, exist_ok=True)
        base = (1.0 if kernel.endswith("a.bzImage") else 2.0) + 0.5 * (n // 2)
        if n != self.fail_at:
            with open(f"{keep}/ab.json", "w") as f:
                json.dump(boot_doc([base, base + 0.1, base + 0.2]), f)
        splats = ["WARNING: x"] if n == self.splat_at else []
        return types.SimpleNamespace(ok=not splats and n != self.fail_at,
                                     output="guest output\n", timed_out=False,
                                     splats=splats, died=False,
                                     status=1 if n == self.fail_at else 0)


def test_run_passes_the_clock_to_every_boot_and_records_it(tmp_path, capsys):
    args = make_args(tmp_path, clock="icount")
    stub = StubBoot()
    assert kernelab.cmd_run(args, boot=stub) == 0
    assert stub.qemu_opts == ["-icount shift=0,sleep=off"]
    assert stub.lab.clock == "icount"


def test_boots_under_different_clocks_are_not_merged():
    docs = [boot_doc([1.0]), boot_doc([2.0])]
    docs[0]["lab"] = {"clock": "parallel", "qemu": "lab", "quantum_ns": 4000}
    docs[1]["lab"] = {"clock": "icount", "qemu": "lab", "quantum_ns": None}
    boots = [{"pair": 0, "setting": s, "doc": d, "dir": s} for s, d in zip("AB", docs)]
    names = {"A": "a", "B": "b"}
    kernels = {s: {"path": s, "setting": "none"} for s in "AB"}
    with pytest.raises(kernelab.KernelabError, match="different clocks"):
        kernelab.merge(boots, names, kernels, 1, True)
    docs[1]["lab"] = dict(docs[0]["lab"])
    assert kernelab.merge(boots, names, kernels, 1, True)["lab"]["clock"] == "parallel"


def test_run_boots_abba_and_merges(tmp_path, capsys):
    args = make_args(tmp_path)
    stub = StubBoot()
    assert kernelab.cmd_run(args, boot=stub) == 0
    kernels = [c[0].rsplit("/", 1)[1] for c in stub.calls]
    assert kernels == ["a.bzImage", "b.bzImage", "b.bzImage", "a.bzImage"]
    cmd_a, cmd_b = stub.calls[0][2], stub.calls[1][2]
    assert "--a none --a-name stock" in cmd_a and "--b " not in cmd_a
    assert "--a feat:NO_STEAL --a-name series" in cmd_b
    assert "--runs 3 --warmup 1" in cmd_a and "--param 2 --loops 100" in cmd_a
    assert cmd_a.endswith('--out "$SCHEDSTEAL_OUT/ab.json"')
    assert "--no-schedstat" not in cmd_a
    err = capsys.readouterr().err
    assert "[boot 1/4] A (stock) on smp2: 3 runs" in err and "[boot 4/4] done" in err

    doc = json.loads((tmp_path / "out" / "kab.json").read_text())
    assert doc["complete"] and doc["kind"] == "kernelab" and doc["runs_per_boot"] == 3
    assert [(b["pair"], b["setting"], b["dir"]) for b in doc["boots"]] == [
        (0, "A", "boot-1-A"), (0, "B", "boot-2-B"), (1, "B", "boot-3-B"),
        (1, "A", "boot-4-A")]
    # run j of a pair's A boot is paired with run j of its B boot
    idx = sorted((r["setting"], r["index"], r["boot"]) for r in doc["runs"])
    assert idx == [("A", i, 0) for i in range(3)] + [("A", i, 3) for i in range(3, 6)] + \
        [("B", i, 1) for i in range(3)] + [("B", i, 2) for i in range(3, 6)]
    assert (tmp_path / "out" / "boot-3-B" / "guest.log").read_text() == "guest output\n"

    rep = kernelab.analyze(doc)
    p = rep["params"][0]
    assert p["A"]["n"] == 6 and p["B"]["n"] == 6
    assert p["paired"]["pairs"] == 6 and p["paired"]["diff_mean"] == pytest.approx(1.0)
    assert p["verdict"] == "B worse (significant)"
    means = [(r["boot"], r["mean"]) for r in rep["per_boot"]]
    assert means == [(0, pytest.approx(1.1)), (1, pytest.approx(2.1)),
                     (2, pytest.approx(2.6)), (3, pytest.approx(1.6))]
    bb = rep["between_boots"][0]
    assert bb["boots"] == {"A": 2, "B": 2}
    assert bb["pct_change"] == pytest.approx(-1.0 / 1.35 * 100)
    assert bb["stddev_of_boot_means"]["A"] == pytest.approx(0.3536, abs=1e-4)
    assert bb["mean_stddev_inside_boots"] == pytest.approx(0.1)
    assert bb["verdict"] == "not significant"     # 2 boots each: p 0.06
    text = kernelab.format_report(rep)
    assert "per boot (3 runs each" in text and "between boots" in text
    assert "stock" in text and "series" in text and "6.12.117" in text


def test_cli_report(tmp_path, capsys):
    args = make_args(tmp_path, boots=1, no_schedstat=True)
    stub = StubBoot()
    assert kernelab.cmd_run(args, boot=stub) == 0
    assert all("--no-schedstat" in c[2] for c in stub.calls)
    path = tmp_path / "out" / "kab.json"
    assert kernelab.main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "not enough boots (need 2+ per kernel)" in out
    assert kernelab.main(["report", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["kind"] == "kernelab"
    assert [len(r["values"]) for r in rep["per_boot"]] == [r["n"] for r in rep["per_boot"]]


def test_cli_report_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    args = make_args(tmp_path, boots=2)
    assert kernelab.cmd_run(args, boot=StubBoot()) == 0
    png = tmp_path / "kab.png"
    assert kernelab.main(["report", str(tmp_path / "out" / "kab.json"), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
    # An unwritable path is a clear error, not a traceback.
    assert kernelab.main(["report", str(tmp_path / "out" / "kab.json"),
                          "--plot", str(tmp_path / "no" / "such" / "x.png")]) != 0
    assert "cannot write" in capsys.readouterr().err
    # The suffix names the format; one matplotlib cannot write is refused.
    jpg = tmp_path / "kab.jpg"
    assert kernelab.main(["report", str(tmp_path / "out" / "kab.json"), "--plot", str(jpg)]) == 0
    assert jpg.read_bytes()[:3] == b"\xff\xd8\xff"
    capsys.readouterr()
    gif = tmp_path / "kab.gif"
    assert kernelab.main(["report", str(tmp_path / "out" / "kab.json"), "--plot", str(gif)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"kernelab: error: --plot {gif}: ")
    assert not gif.exists()


@pytest.mark.parametrize("stub, message", [
    (StubBoot(fail_at=2), "boot 3 (series) failed: the command exited with status 1"),
    (StubBoot(splat_at=1), "boot 2 (series) failed: 1 splat(s) in its kernel log"),
])
def test_failed_boot_stops_and_keeps_the_boots_done(tmp_path, capsys, stub, message):
    args = make_args(tmp_path)
    assert kernelab.cmd_run(args, boot=stub) == 1
    assert message in capsys.readouterr().err
    assert len(stub.calls) == (3 if stub.fail_at else 2)
    doc = json.loads((tmp_path / "out" / "kab.json").read_text())
    assert doc["complete"] is False
    assert len(doc["boots"]) == (2 if stub.fail_at else 2)


@pytest.mark.parametrize("change, message", [
    ({"a_kernel": "/nonexistent/bzImage"}, "--a-kernel: no kernel image"),
    ({"b_name": "stock"}, "must differ"),
    ({"boots": 0}, "--boots must be at least 1"),
    ({"runs": 0}, "--runs must be at least 1"),
    ({"preset": "nope"}, "unknown preset"),
    ({"param": ["2,x"]}, "--param"),
])
def test_bad_input_boots_nothing(tmp_path, capsys, change, message):
    args = make_args(tmp_path, **change)
    stub = StubBoot()
    argv = ["run", "--a-kernel", args.a_kernel, "--b-kernel", args.b_kernel,
            "--a-name", args.a_name, "--b-name", args.b_name, "--preset", args.preset,
            "--boots", str(args.boots), "--runs", str(args.runs), "--param", args.param[0],
            "--out", args.out]
    parser = kernelab.build_parser()
    parsed = parser.parse_args(argv)
    with pytest.raises(Exception) as exc:
        kernelab.cmd_run(parsed, boot=stub)
    assert message in str(exc.value)
    assert not stub.calls and not (tmp_path / "out").exists()
    rc = kernelab.main(argv)
    assert rc == 2 and message in capsys.readouterr().err


def test_report_refuses_an_abbench_file(tmp_path, capsys):
    p = tmp_path / "ab.json"
    doc = boot_doc([1.0, 1.1])
    p.write_text(json.dumps(doc))
    assert kernelab.main(["report", str(p)]) == 2
    assert "not a kernelab results file" in capsys.readouterr().err


def test_report_refuses_a_file_that_is_not_json_text(tmp_path, capsys):
    p = tmp_path / "kab.json"
    p.write_bytes(b"\xff\xfe\x00\x01binary")
    assert kernelab.main(["report", str(p)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"kernelab: error: {p}: not JSON (not UTF-8 text)\n"


def _set_runs(key, value):
    return lambda d: [r.update({key: value}) for r in d["runs"]]


BAD_KERNELAB = {
    "boot a string": (lambda d: d.update(boots=["a"]), "boot 1: not an object"),
    "boot without fields": (lambda d: d.update(boots=[{}]),
                            "boot 1: 'position' must be 0"),
    "boot out of order": (lambda d: d["boots"][1].update(position=0),
                          "boot 2: 'position' must be 1"),
    "boot position string": (lambda d: d["boots"][0].update(position="x"),
                             "boot 1: 'position' must be 0"),
    "boot of kernel C": (lambda d: d["boots"][0].update(setting="C"),
                         "boot 1: 'setting' must be A or B, not 'C'"),
    "boot pair string": (lambda d: d["boots"][0].update(pair="0"),
                         "boot 1: 'pair' must be an integer"),
    "run without boot": (lambda d: [r.pop("boot") for r in d["runs"]],
                         "run 1: 'boot' must name a boot, not None"),
    "run of boot '0'": (_set_runs("boot", "0"), "run 1: 'boot' must name a boot, not '0'"),
    "run of boot 99": (_set_runs("boot", 99), "run 1: 'boot' must name a boot, not 99"),
    "run of the other kernel": (_set_runs("boot", 1),
                                "run 1: it is an A run, but boot 2 booted B"),
    "runs_per_boot string": (lambda d: d.update(runs_per_boot="five"),
                             "'runs_per_boot' must be an integer"),
    "boot lab a string": (lambda d: d["boots"][0].update(lab="parallel"),
                          "boot 1: 'lab' must be an object"),
    "boots under two clocks": (
        lambda d: [b.update(lab={"clock": "parallel" if b["position"] % 2 else "icount",
                                 "qemu": "lab"}) for b in d["boots"]],
        "the boots were taken under different clocks"),
}


@pytest.mark.parametrize("what", list(BAD_KERNELAB))
def test_report_refuses_a_malformed_kernelab_file(tmp_path, capsys, what):
    change, message = BAD_KERNELAB[what]
    doc = json.loads(BOOTS_DIFFER.read_text())
    change(doc)
    path, plot = tmp_path / "kab.json", tmp_path / "kab.png"
    path.write_text(json.dumps(doc))
    for extra in ([], ["--json"], ["--plot", str(plot)]):
        assert kernelab.main(["report", str(path), *extra]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith(f"kernelab: error: {path}: {message}")
        assert err.count("\n") == 1 and not plot.exists()


def test_merge_refuses_boots_that_ran_different_workloads():
    one, two = boot_doc([1.0]), boot_doc([1.0], params=(4,))
    boots = [{"pair": 0, "setting": "A", "doc": one, "dir": "d1"},
             {"pair": 0, "setting": "B", "doc": two, "dir": "d2"}]
    kernels = {s: {"path": "k", "setting": "none"} for s in "AB"}
    with pytest.raises(kernelab.KernelabError, match="boot 2 ran another params"):
        kernelab.merge(boots, {"A": "a", "B": "b"}, kernels, 1, True)


def jump_label_tree(tmp_path, name, jump_label):
    """A bzImage where a build leaves it, beside its .config."""
    boot = tmp_path / name / "arch" / "x86" / "boot"
    boot.mkdir(parents=True)
    (tmp_path / name / ".config").write_text(
        "CONFIG_JUMP_LABEL=y\n" if jump_label else "# CONFIG_JUMP_LABEL is not set\n")
    (boot / "bzImage").write_bytes(b"k")
    return str(boot / "bzImage")


@pytest.mark.parametrize("qemu_opts, refused", [
    ([], True),
    (["-accel tcg,thread=single"], False),
    (["-icount shift=auto,sleep=off"], False),
])
def test_jump_label_kernel_against_one_without_is_refused(tmp_path, qemu_opts, refused):
    args = make_args(tmp_path, a_kernel=jump_label_tree(tmp_path, "a", False),
                     b_kernel=jump_label_tree(tmp_path, "b", True), qemu_opts=qemu_opts)
    stub = StubBoot()
    if refused:
        with pytest.raises(kernelab.KernelabError, match="--b-kernel has jump labels"):
            kernelab.cmd_run(args, boot=stub)
        assert stub.calls == [] and not os.path.exists(args.out)
    else:
        kernelab.check_run_args(args)


def test_two_jump_label_kernels_are_compared(tmp_path):
    args = make_args(tmp_path, a_kernel=jump_label_tree(tmp_path, "a", True),
                     b_kernel=jump_label_tree(tmp_path, "b", True))
    kernelab.check_run_args(args)


BOOTS_DIFFER = Path(__file__).parent / "fixtures" / "kernelab" / "boots-differ.json"


def test_report_leads_with_the_boot_mean_verdict(capsys):
    """Boots that differ more than runs: the pooled runs read significant
    (p 0.006), the boot means do not (p 0.32). The boot-mean verdict must
    come first and be the one named; the pooled table is labelled so."""
    assert kernelab.main(["report", str(BOOTS_DIFFER)]) == 0
    out = capsys.readouterr().out
    head = "\n".join(out.splitlines()[:6])
    assert "boot means" in head and "read this one" in head
    assert "not significant" in head and "significant)" not in head
    [row] = [line for line in out.splitlines()[:6] if line.startswith("g=2")]
    assert "(" in row and "*" not in row    # the verdict's %chg: not significant
    pooled = out.index("pooled runs (within-boot)")
    assert pooled > out.index("not significant")
    assert out.index("B worse (significant)") > pooled
    assert "not the verdict" in out[pooled:out.index("B worse (significant)")]

    assert kernelab.main(["report", str(BOOTS_DIFFER), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    verdict = rep["verdict"]
    assert "boot means" in verdict["test"]
    [entry] = verdict["params"]
    assert entry["param"] == 2 and entry["verdict"] == "not significant"
    assert entry["significant"] is False
    assert entry["p_value"] == pytest.approx(0.3236, abs=1e-4)
    assert entry["pct_change"] == pytest.approx(-25.81, abs=0.01)
    # the pooled test is still there, and says it is not the verdict
    assert rep["params"][0]["verdict"] == "B worse (significant)"
    assert "not the verdict" in verdict["pooled_note"]
