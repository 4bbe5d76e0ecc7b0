"""schedsteal-irq-preferred (schedsteal.guest.irq_preferred): the agent
that keeps device interrupts on the preferred CPUs, on a fake /proc/irq."""
import json
import shutil

import pytest

from schedsteal.guest import irq_preferred as agent_mod


def make_tree(tmp_path, irqs, preferred="0-7", default=None):
    """A fake /proc/irq: irqs is {irq: affinity list}; `default`: the hex
    default_smp_affinity (None: no such file)."""
    pref = tmp_path / "preferred"
    pref.write_text(preferred + "\n")
    irq_dir = tmp_path / "irq"
    irq_dir.mkdir()
    if default is not None:
        (irq_dir / "default_smp_affinity").write_text(default + "\n")
    for irq, aff in irqs.items():
        d = irq_dir / str(irq)
        d.mkdir()
        f = d / "smp_affinity_list"
        f.write_text(aff + "\n")
    return str(pref), str(irq_dir)


def aff(irq_dir, irq):
    with open(f"{irq_dir}/{irq}/smp_affinity_list") as f:
        return f.read().strip()


def test_cpumask_hex_words():
    assert agent_mod.cpumask_hex([0, 1]) == "00000003"
    assert agent_mod.cpumask_hex([0, 33]) == "00000002,00000001"


def test_narrows_to_preferred_part_and_gives_it_back(tmp_path):
    pref, irq_dir = make_tree(tmp_path, {1: "0-7", 2: "5", 3: "0-1", 4: "1,6"}, default="ff")
    a = agent_mod.Agent(pref, irq_dir)
    with open(pref, "w") as f:
        f.write("0-1\n")
    out = a.apply()
    assert out["moved"] == {"1": ["0-7", "0-1"], "2": ["5", "0-1"], "4": ["1,6", "1"],
                            "default": ["0-7", "0-1"]}
    assert aff(irq_dir, 1) == "0-1" and aff(irq_dir, 2) == "0-1" and aff(irq_dir, 3) == "0-1"
    with open(f"{irq_dir}/default_smp_affinity") as f:
        assert f.read().strip() == "00000003"
    # Nothing changed: a second pass writes nothing.
    assert a.apply()["moved"] == {}
    # CPUs come back: every narrowed interrupt gets its own affinity back.
    with open(pref, "w") as f:
        f.write("0-7\n")
    out = a.apply()
    assert out["restored"] == {"1": ["0-1", "0-7"], "2": ["0-1", "5"], "4": ["1", "1,6"],
                               "default": ["0-1", "0-7"]}
    assert [aff(irq_dir, i) for i in (1, 2, 3, 4)] == ["0-7", "5", "0-1", "1,6"]
    with open(f"{irq_dir}/default_smp_affinity") as f:
        assert f.read().strip() == "000000ff"
    assert a.saved == {}


def test_partial_return_narrows_again_from_the_original(tmp_path):
    pref, irq_dir = make_tree(tmp_path, {1: "2-5"}, preferred="0-1")
    a = agent_mod.Agent(pref, irq_dir)
    assert a.apply()["moved"] == {"1": ["2-5", "0-1"]}
    with open(pref, "w") as f:
        f.write("0-3\n")
    assert a.apply()["moved"] == {"1": ["0-1", "2-3"]}
    assert a.saved["1"] == ({2, 3, 4, 5}, {2, 3})


def test_an_operators_change_is_kept(tmp_path):
    """Review finding: an affinity written by someone else after the agent
    narrowed it is theirs, not to be undone now or restored later."""
    pref, irq_dir = make_tree(tmp_path, {1: "0-7"}, preferred="0-3")
    a = agent_mod.Agent(pref, irq_dir)
    a.apply()
    assert aff(irq_dir, 1) == "0-3"
    with open(f"{irq_dir}/1/smp_affinity_list", "w") as f:
        f.write("2\n")
    assert a.apply()["moved"] == {}
    assert aff(irq_dir, 1) == "2" and "1" not in a.saved
    with open(pref, "w") as f:
        f.write("0-7\n")
    assert a.apply()["restored"] == {}
    assert aff(irq_dir, 1) == "2"


def test_an_interrupt_that_goes_away_is_forgotten(tmp_path):
    """Review finding: a number reused by another device must not get the
    old device's affinity back."""
    pref, irq_dir = make_tree(tmp_path, {30: "4-7"}, preferred="0-3")
    a = agent_mod.Agent(pref, irq_dir)
    a.apply()
    shutil.rmtree(f"{irq_dir}/30")
    a.apply()
    assert "30" not in a.saved
    (tmp_path / "irq" / "30").mkdir()
    (tmp_path / "irq" / "30" / "smp_affinity_list").write_text("0-3\n")
    with open(pref, "w") as f:
        f.write("0-7\n")
    assert a.apply()["restored"] == {}
    assert aff(irq_dir, 30) == "0-3"


def test_the_default_is_narrowed_only_to_its_preferred_part(tmp_path):
    """Review finding: an irqaffinity= default (0f) stays 0f when nothing
    is parked, and is narrowed within itself when CPUs are."""
    pref, irq_dir = make_tree(tmp_path, {}, preferred="0-7", default="0f")
    a = agent_mod.Agent(pref, irq_dir)
    assert a.apply()["moved"] == {}
    with open(pref, "w") as f:
        f.write("0-1,6-7\n")
    assert a.apply()["moved"] == {"default": ["0-3", "0-1"]}


def test_refused_interrupt_as_root(tmp_path, monkeypatch):
    """The kernel refuses a managed interrupt's write with EIO."""
    pref, irq_dir = make_tree(tmp_path, {1: "0-7", 9: "0-7"}, preferred="0-1")
    real = agent_mod.kernel.write

    def write(path, text):
        if "/9/" in path:
            raise agent_mod.kernel.KernelError(5, "cannot write: Input/output error")
        real(path, text)
    monkeypatch.setattr(agent_mod.kernel, "write", write)
    out = agent_mod.Agent(pref, irq_dir).apply()
    assert out["refused"] == {"9": "EIO"} and out["moved"] == {"1": ["0-7", "0-1"]}
    assert aff(irq_dir, 9) == "0-7"


def test_cli_once_json(tmp_path, capsys):
    pref, irq_dir = make_tree(tmp_path, {1: "0-7"}, preferred="0,1")
    assert agent_mod.main(["--once", "--json", "--preferred", pref, "--irq-dir", irq_dir]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["moved"] == {"1": ["0-7", "0-1"]}
    assert "moved 1, restored 0, refused 0" in cap.err


def test_cli_errors(tmp_path, capsys):
    pref, irq_dir = make_tree(tmp_path, {1: "0-7"}, preferred="")
    assert agent_mod.main(["--once", "--preferred", pref, "--irq-dir", irq_dir]) == 1
    assert "is empty" in capsys.readouterr().err
    assert agent_mod.main(["--once", "--preferred", str(tmp_path / "none"),
                           "--irq-dir", irq_dir]) == 1
    assert aff(irq_dir, 1) == "0-7"
    with pytest.raises(SystemExit) as e:
        agent_mod.main(["--interval", "0"])
    assert e.value.code == 2
