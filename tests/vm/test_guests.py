"""schedsteal-guests: guests that talk to each other over a network of
their own (issue 25). The harness, not the experiment: a pair of guests
boots on the lab QEMU, links up, runs a short cell of every mode with and
without stress-ng, and leaves nothing behind; a pair whose server dies at
once is torn down. The experiment itself is `make bench-guests`."""
import pytest

from schedsteal import guests

pytestmark = pytest.mark.full

SHORT = guests.Plan(pairs=1, vcpus=2, workers=4, seconds=2, settle_s=0.5, runs=1, stress="0,1")


@pytest.fixture(scope="module")
def pair_run(test_kernel, lab_qemu, tmp_path_factory):
    return guests.run(test_kernel, lab_qemu, SHORT, keep=str(tmp_path_factory.mktemp("pair")))


def test_a_pair_runs_every_cell_and_leaves_nothing(pair_run):
    r = pair_run
    assert r["errors"] == {} and r["leaks"] == []
    for name in ("client0", "server0"):
        g = r["guests"][name]
        assert g["status"] == 0 and g["splats"] == [] and not g["aborted"], (name, g)
    assert r["guests"]["server0"]["result"]["errors"] == []
    rows = r["pairs"][0]["rows"]
    assert [(x["stress"], x["mode"]) for x in rows] == [(s, m) for s in (0, 1)
                                                       for m in ("all", "static", "governor")]
    # Every cell moved transactions between the guests, over their link.
    assert all(x["transactions"] > 0 for x in rows), rows
    # stress-ng ran in both guests when asked, and only then.
    for x in rows:
        for side in ("client", "server"):
            assert (x[side]["bogo"] is not None and x[side]["bogo"] > 0) == (x["stress"] > 0), x
    # Each mode is what both guests ran: static keeps CPU 0 only.
    for x in rows:
        want = "0" if x["mode"] == "static" else "0-1"
        assert x["preferred_at_start"] == [want, want], x
    # The preferred count was sampled over every cell: the static set's
    # one CPU and every CPU never change; the governor's stays in 1-2.
    for x in rows:
        for side in ("client", "server"):
            pref = x[side]["pref"]
            assert pref["mean"] is not None and 1 <= pref["mean"] <= 2, x
            if x["mode"] != "governor":
                assert pref["changes"] == 0, x
                assert pref["mean"] == (1 if x["mode"] == "static" else 2), x


def test_a_pair_whose_server_dies_is_torn_down(test_kernel, lab_qemu, tmp_path):
    """The server's command fails at once; the client, waiting for it,
    must be stopped, not left to its own timeout, and nothing left."""
    r = guests.run(test_kernel, lab_qemu, SHORT, keep=str(tmp_path),
                   commands={"server0": "exit 3"})
    assert "server0" in r["errors"] and "status 3" in r["errors"]["server0"]
    assert r["guests"]["client0"]["aborted"]
    assert r["pairs"] == [] and r["leaks"] == []
