"""schedsteal.guest.trace.Instance, the runner's own tracefs instance, on a
fake tracefs (mkdir and rmdir replaced: a plain directory has no files)."""
import shutil
from pathlib import Path

import pytest

from schedsteal.guest import trace

HEADER = ("# tracer: nop\n#\n# entries-in-buffer/entries-written: 90/100   #P:2\n#\n")


@pytest.fixture
def tracing(tmp_path, monkeypatch):
    (tmp_path / "instances").mkdir()

    def mkdir(path):
        Path(path).mkdir()
        for name in ("tracing_on", "buffer_size_kb", "trace",
                     *(f"events/sched/{e}/enable" for e in trace.SCHED_EVENTS)):
            (Path(path) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(path) / name).write_text("1\n")
    monkeypatch.setattr(trace, "_mkdir", mkdir)
    monkeypatch.setattr(trace, "_rmdir", shutil.rmtree)
    return tmp_path


def test_instance_records_its_events_and_goes(tracing, monkeypatch):
    inst = trace.Instance("schedsteal-1", 4096, tracing=str(tracing))
    monkeypatch.setattr(trace.os, "cpu_count", lambda: 3)
    # no buffer_total_size_kb (an old kernel): per CPU times the CPUs
    assert inst.create() == 3 * 4096
    path = Path(inst.path)
    assert path == tracing / "instances" / "schedsteal-1"
    assert (path / "tracing_on").read_text() == "0"
    assert (path / "buffer_size_kb").read_text() == "4096"
    assert all((path / f"events/sched/{e}/enable").read_text() == "1"
               for e in trace.SCHED_EVENTS)
    inst.start()
    assert (path / "tracing_on").read_text() == "1" and (path / "trace").read_text() == ""
    inst.stop()
    assert (path / "tracing_on").read_text() == "0"
    inst.remove()
    assert not path.exists() and (tracing / "instances").is_dir()
    inst.remove()   # twice: nothing to do


def test_copy_to_streams_in_chunks_and_counts_lost_events(tracing, tmp_path, monkeypatch):
    inst = trace.Instance("schedsteal-2", 64, tracing=str(tracing))
    inst.create()
    body = "".join(f"  task-{n} [001] ..... {n}.000000: sched_switch: x\n" for n in range(500))
    (Path(inst.path) / "trace").write_text(HEADER + body)
    monkeypatch.setattr(trace, "COPY_CHUNK", 100)
    monkeypatch.setattr(trace, "HEAD_BYTES", 200)   # the header fits; the rest is not kept
    out = tmp_path / "trace-0.txt"
    assert inst.copy_to(str(out)) == 10
    assert out.read_text() == HEADER + body


def test_copy_without_header_is_an_error(tracing, tmp_path):
    inst = trace.Instance("schedsteal-3", 64, tracing=str(tracing))
    inst.create()
    with pytest.raises(trace.TraceError, match="no entries-in-buffer"):
        inst.copy_to(str(tmp_path / "t.txt"))


def test_create_without_tracefs_says_so(tmp_path):
    inst = trace.Instance("schedsteal-4", 64, tracing=str(tmp_path / "none"))
    with pytest.raises(trace.TraceError, match="cannot create tracefs instance .*mounted"):
        inst.create()
    inst.remove()   # nothing was made: nothing to remove
