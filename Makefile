# sched-steal: build, boot and measure the series. `make help` lists targets.
SHELL := /bin/bash
CONFIG ?= test
PRESET ?= smp2
CACHE ?= $(or $(SCHED_STEAL_CACHE),$(HOME)/.cache/sched-steal)
PY := $(CACHE)/venv/bin/python
export SCHED_STEAL_CACHE := $(CACHE)
export PYTHONPATH := $(CURDIR)/tools
export CMD

.PHONY: help setup kernel vm demo baseline bench-steal bench-park test test-unit test-series test-vm \
	worktree export-patches checkpatch clean-build

help:
	@echo "make demo            build, boot $(PRESET) and print an A/B table"
	@echo "make test            every test: tools, series, kernel build, boots"
	@echo "make kernel [CONFIG=test|debug]   build the series; last line is the bzImage"
	@echo "make vm PRESET=NAME CMD='...' [CONFIG=test|debug]   run CMD in a guest"
	@echo "make baseline        hackbench A/A runs on smp2 and smt4 (docs/results.md)"
	@echo "make bench-steal     NO_STEAL vs STEAL benchmarks (docs/results.md)"
	@echo "make bench-park      all CPUs vs parked vs unplugged on overcommit8 (docs/results.md)"
	@echo "make worktree | export-patches | checkpatch   patch developer workflow"
	@echo "presets:"; $(PY) -m schedsteal.vm presets 2>/dev/null || true

setup:
	@scripts/setup-host.sh

kernel: setup
	@scripts/build-kernel.sh $(CONFIG)

vm: setup
	@test -n "$$CMD" || { echo "make vm: CMD='...' is required" >&2; exit 2; }
	@k=$$(scripts/build-kernel.sh $(CONFIG) | tail -n 1) && \
	$(PY) -m schedsteal.vm run --kernel "$$k" --preset $(PRESET) -- "$$CMD"

demo: setup
	@scripts/demo.sh $(PRESET)

baseline: setup
	@scripts/baseline.sh

bench-steal: setup
	@scripts/bench-steal.sh

bench-park: setup
	@scripts/bench-park.sh

test: setup test-unit test-series test-vm

test-unit:
	$(PY) -m pytest -q tests/unit

test-series:
	$(PY) -m pytest -q tests/series

test-vm:
	@t=$$(scripts/build-kernel.sh test | tail -n 1) && \
	d=$$(scripts/build-kernel.sh debug | tail -n 1) && \
	SCHEDSTEAL_KERNEL_TEST="$$t" SCHEDSTEAL_KERNEL_DEBUG="$$d" $(PY) -m pytest -q tests/vm

worktree: setup
	@scripts/worktree.sh

export-patches:
	@scripts/export-patches.sh

checkpatch: setup
	@scripts/checkpatch.sh

clean-build:
	rm -rf $(CACHE)/build
