"""schedsteal.guest.kernel helpers that read /proc, on fake trees."""
import pytest

from schedsteal.guest import kernel


@pytest.mark.parametrize("wchan,blocked", [
    ("anon_pipe_read", True),      # asleep, off the runqueue
    ("0", False),                  # queued: preempted on its way to sleep, delayed, running
    ("", False),
])
def test_task_blocked_reads_wchan(tmp_path, wchan, blocked):
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "wchan").write_text(wchan)
    assert kernel.task_blocked(42, proc=str(tmp_path)) is blocked


def test_task_blocked_of_a_gone_task_raises(tmp_path):
    with pytest.raises(OSError):
        kernel.task_blocked(42, proc=str(tmp_path))


def test_steer_irqs_moves_what_may_move_and_restore_puts_it_back(tmp_path):
    for irq, aff in (("1", "0-3"), ("21", "3")):
        (tmp_path / irq).mkdir()
        (tmp_path / irq / "smp_affinity_list").write_text(aff + "\n")
    (tmp_path / "9").mkdir()  # a per-CPU interrupt: its file refuses writes
    (tmp_path / "9" / "smp_affinity_list").mkdir()
    (tmp_path / "default_smp_affinity").write_text("f\n")  # not an irq
    saved = kernel.steer_irqs("0", irq_dir=str(tmp_path))
    assert saved == {str(tmp_path / "1" / "smp_affinity_list"): "0-3",
                     str(tmp_path / "21" / "smp_affinity_list"): "3"}
    assert (tmp_path / "21" / "smp_affinity_list").read_text() == "0\n"
    assert (tmp_path / "1" / "smp_affinity_list").read_text() == "0\n"
    kernel.restore_irqs(saved)
    assert (tmp_path / "1" / "smp_affinity_list").read_text() == "0-3\n"
    assert (tmp_path / "21" / "smp_affinity_list").read_text() == "3\n"
    assert (tmp_path / "default_smp_affinity").read_text() == "f\n"


def fake_machine(root, governors=("performance", "performance"), smt=("on", "1")):
    """/proc and /sys/devices/system/{cpu,node} of a 2-core, 4-thread,
    one-LLC, one-node machine."""
    proc, cpu, node = root / "proc", root / "cpu", root / "node"
    proc.mkdir()
    (proc / "cpuinfo").write_text("".join(
        f"processor\t: {n}\nmodel name\t: Fake CPU @ 2.0GHz\nflags\t\t: fpu\n\n" for n in range(4)))
    (proc / "cmdline").write_text("BOOT_IMAGE=/vmlinuz ro mitigations=off\n")
    (cpu).mkdir()
    (cpu / "online").write_text("0-3\n")
    for n in range(4):
        d = cpu / f"cpu{n}"
        (d / "topology").mkdir(parents=True)
        (d / "topology" / "thread_siblings_list").write_text("0,2\n" if n % 2 == 0 else "1,3\n")
        for i, (level, shared) in enumerate(((1, str(n)), (2, str(n)), (3, "0-3"))):
            (d / "cache" / f"index{i}").mkdir(parents=True)
            (d / "cache" / f"index{i}" / "level").write_text(f"{level}\n")
            (d / "cache" / f"index{i}" / "shared_cpu_list").write_text(shared + "\n")
        if n < len(governors):
            (d / "cpufreq").mkdir()
            (d / "cpufreq" / "scaling_governor").write_text(governors[n] + "\n")
    if smt:
        (cpu / "smt").mkdir()
        (cpu / "smt" / "control").write_text(smt[0] + "\n")
        (cpu / "smt" / "active").write_text(smt[1] + "\n")
    (node / "node0").mkdir(parents=True)
    (node / "node0" / "cpulist").write_text("0-3\n")
    return dict(proc=str(proc), cpu_sysfs=str(cpu), node_sysfs=str(node))


def test_machine_records_cpu_topology_governors_smt_kernel(tmp_path):
    import os
    got = kernel.machine(**fake_machine(tmp_path, governors=("performance", "schedutil")))
    assert got == {"model_name": "Fake CPU @ 2.0GHz", "online": "0-3",
                   "topology": {"smt_groups": 2, "llc_groups": 1, "numa_nodes": 1},
                   "scaling_governor": ["performance", "schedutil"],
                   "smt_control": "on", "smt_active": 1,
                   "release": os.uname().release,
                   "cmdline": "BOOT_IMAGE=/vmlinuz ro mitigations=off"}


def test_machine_without_cpufreq_smt_or_model_name(tmp_path):
    paths = fake_machine(tmp_path, governors=(), smt=None)
    (tmp_path / "proc" / "cpuinfo").write_text("processor\t: 0\nCPU part\t: 0xd0c\n")
    got = kernel.machine(**paths)
    assert got["scaling_governor"] == ["none"]
    assert got["smt_control"] is None and got["smt_active"] is None
    assert got["model_name"] is None and got["online"] == "0-3"


def test_machine_without_sysfs_still_records_the_kernel(tmp_path):
    got = kernel.machine(proc=str(tmp_path), cpu_sysfs=str(tmp_path / "no"),
                         node_sysfs=str(tmp_path / "no"))
    assert got["topology"] is None and got["online"] is None and got["release"]
