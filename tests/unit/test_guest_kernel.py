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
