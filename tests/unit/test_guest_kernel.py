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
