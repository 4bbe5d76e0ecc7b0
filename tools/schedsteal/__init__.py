"""sched-steal tools: two halves (docs/architecture.md has the map).

``schedsteal.guest``: the only code that touches the guest's kernel
(sysfs, debugfs, procfs, tracefs, cgroups), settings, workload runners and
the probes. It runs inside the guest on a bare python3: standard library
only, Python 3.11.

Host half, the top-level modules: ``schedstat`` (parse, delta, report,
diff), ``stats``, ``table`` (the one table formatter), ``abbench`` (the A/B
report and plot; its ``run`` is ``guest.runner``), ``parktiming``, ``vm``
(presets, booting guests, kernel-log scan, reading a guest's JSON
result). ``cpulist`` and ``schedstat``'s parsing are pure and serve both
halves; they too use the standard library only.
"""
