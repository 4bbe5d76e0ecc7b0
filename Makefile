# sched-steal: build, boot and measure the series. `make help` lists targets.
SHELL := /bin/bash
# pipefail: a failed build must never hand an empty path to the next step.
.SHELLFLAGS := -eu -o pipefail -c
CONFIG ?= test
PRESET ?= smp2
FLAVOUR ?= cloud-amd64
# scripts/lib.sh is the one definition of the cache directory.
CACHE := $(shell scripts/lib.sh --cache-dir)
export SCHEDSTEAL_CACHE := $(CACHE)
VENV := $(CACHE)/venv
PY := $(VENV)/bin/python
STAGE := scripts/stage.sh
export CMD
# Topics of the series to build (patches/topics); default: all.
export TOPICS

.PHONY: help setup kernel kernels qemu vm demo test-topics test-full test-vm-full baseline bench-steal bench-steal-far bench-sis bench-park bench-seed bench-guests compare-kernels stock-kernel deb deb-config test-deb test test-unit \
	test-series test-vm test-jump-label test-kcsan fresh-check rebase-check bisect-check worktree export-patches checkpatch clean-build

help:
	@echo "make demo            build, boot $(PRESET) and print an A/B table"
	@echo "make test            the tests: tools, series, kernel builds, a boot for every feature (~45 min fresh)"
	@echo "make test-full       the rest of the matrix: every preset, jump labels, the lab QEMU (CI runs both)"
	@echo "make test-jump-label the parking and stealing tests on the jump-label kernel"
	@echo "make test-kcsan      the KCSAN kernel under the park/hotplug/STEAL storm (not in CI)"
	@echo "make test-topics TOPICS=prep,park   some topics alone: their kernels and their tests (not in CI)"
	@echo "make kernel [CONFIG=test|debug|jumplabel|modules|kcsan] [TOPICS=prep,steal,...]   build the series (or some of its topics); prints the bzImage path"
	@echo "make qemu            build the lab QEMU (steal time under TCG, the parallel clock; docs/lab.md)"
	@echo "make vm PRESET=NAME CMD='...' [CONFIG=test|debug|jumplabel|modules|kcsan]   run CMD in a guest"
	@echo "make baseline        hackbench A/A runs on smp2 and smt4 (docs/results.md)"
	@echo "make bench-steal     NO_STEAL vs STEAL benchmarks (docs/results.md)"
	@echo "make bench-steal-far stealing beyond the LLC: none/LLC/node/NUMA on llc2x4, numa2, big32 (docs/results.md)"
	@echo "make bench-sis       NO_SIS_SPARSE vs SIS_SPARSE (wakeup search) on 8-32 vCPUs (docs/results.md)"
	@echo "make bench-park      all CPUs vs parked vs unplugged on overcommit8 (docs/results.md)"
	@echo "make bench-seed      the design's tables under the parallel clock: llc20, numa40, llc2x4 (SHAPES=llc44 adds the 44-CPU shape; PAIRS picks cells; docs/results.md)"
	@echo "make bench-guests    the parking design's experiment: guest pairs, request/response, all vs static vs governor"
	@echo "make compare-kernels [PRESET=...] [PAIR=test|debian]   kernel A vs kernel B, alternating boots"
	@echo "make deb [FLAVOUR=cloud-amd64] [TOPICS=...]   Debian packages of the series (or some topics) with Debian's config (hours)"
	@echo "make test-deb [FLAVOUR=...]   boot the packaged kernel (not installed) and run the smoke checks"
	@echo "make stock-kernel    build the pinned 6.12 without the series; prints the bzImage path"
	@echo "make fresh-check [FRESH=setup|demo|test|deb|qemu]   the README path in a fresh Debian 12 chroot"
	@echo "make rebase-check [BUMP=1] [BUILD=1]   does the series apply (and build) on every 6.12 the archive offers?"
	@echo "make bisect-check    build every commit of the series (test config; not in CI)"
	@echo "make worktree | export-patches | checkpatch   patch developer workflow"
	@echo "presets:"; if [ -x $(VENV)/bin/schedsteal-vm ]; then $(VENV)/bin/schedsteal-vm presets; \
		else echo "  (run make setup first)"; fi

setup:
	@$(STAGE) setup scripts/setup-host.sh

kernel: setup
	@scripts/build-kernel.sh $(CONFIG)

# The three kernels the tests boot, each its own timed stage.
kernels: setup
	@$(STAGE) build-test-kernel scripts/build-kernel.sh test >/dev/null
	@$(STAGE) build-debug-kernel scripts/build-kernel.sh debug >/dev/null
	@$(STAGE) build-jumplabel-kernel scripts/build-kernel.sh jumplabel >/dev/null
	@$(STAGE) build-modules-kernel scripts/build-kernel.sh modules >/dev/null

# The lab QEMU: Debian's source of the installed QEMU with qemu/patches.
qemu: setup
	@$(STAGE) build-lab-qemu scripts/build-qemu.sh

vm: setup
	@test -n "$$CMD" || { echo "make vm: CMD='...' is required" >&2; exit 2; }
	@k=$$(scripts/build-kernel.sh $(CONFIG)); \
	$(VENV)/bin/schedsteal-vm run --kernel "$$k" --preset $(PRESET) -- "$$CMD"

demo: setup
	@$(STAGE) demo scripts/demo.sh $(PRESET)

baseline: setup
	@scripts/baseline.sh

bench-steal: setup
	@scripts/bench-steal.sh

bench-steal-far: setup
	@scripts/bench-steal-far.sh

bench-sis: setup
	@scripts/bench-sis.sh

bench-park: setup
	@scripts/bench-park.sh

bench-seed: setup
	@scripts/bench-seed.sh

bench-guests: setup
	@scripts/bench-guests.sh

stock-kernel: setup
	@scripts/stock-kernel.sh $(CONFIG)

deb: setup
	@$(STAGE) deb scripts/build-deb.sh $(FLAVOUR)

deb-config: setup
	@$(STAGE) deb-config scripts/build-deb.sh --config-only $(FLAVOUR)

# The packaged kernel, extracted (nothing is installed on the host).
test-deb: setup
	@k=$$($(STAGE) deb-kernel scripts/deb-kernel.sh series $(FLAVOUR)); \
	SCHEDSTEAL_KERNEL_DEB="$$k" $(STAGE) vm-tests-deb $(PY) -m pytest -q --durations=0 tests/vm/test_deb.py

compare-kernels: setup
	@$(STAGE) compare-kernels scripts/compare-kernels.sh $(PRESET)

# Two tiers. `make test` (the README's command) covers every feature with
# at least one boot, lockdep included, on the test and debug kernels: what
# a newcomer's fresh machine can afford. `make test-full` is the rest of the
# matrix (tests marked `full`): the other presets and parameters, the
# jump-label kernel, the lab QEMU and its validation. CI runs both.
test: setup
	@$(MAKE) --no-print-directory test-unit test-series test-vm

test-full: setup
	@$(MAKE) --no-print-directory test-vm-full

test-unit:
	@$(STAGE) unit-tests $(PY) -m pytest -q tests/unit

test-series:
	@$(STAGE) series-tests $(PY) -m pytest -q tests/series

test-vm: setup
	@t=$$($(STAGE) build-test-kernel scripts/build-kernel.sh test); \
	d=$$($(STAGE) build-debug-kernel scripts/build-kernel.sh debug); \
	SCHEDSTEAL_KERNEL_TEST="$$t" SCHEDSTEAL_KERNEL_DEBUG="$$d" \
		$(STAGE) vm-tests $(PY) -m pytest -q --durations=0 --durations-min=10 -m "not full and not kcsan" tests/vm

test-vm-full: kernels qemu
	@t=$$(scripts/build-kernel.sh test); d=$$(scripts/build-kernel.sh debug); \
	j=$$(scripts/build-kernel.sh jumplabel); m=$$(scripts/build-kernel.sh modules); \
	q=$$(scripts/build-qemu.sh --path); \
	SCHEDSTEAL_KERNEL_TEST="$$t" SCHEDSTEAL_KERNEL_DEBUG="$$d" SCHEDSTEAL_KERNEL_JUMPLABEL="$$j" \
	SCHEDSTEAL_KERNEL_MODULES="$$m" SCHEDSTEAL_QEMU_LAB="$$q" \
		$(STAGE) vm-tests-full $(PY) -m pytest -q --durations=0 --durations-min=10 -m full tests/vm

# The KCSAN kernel under the park/hotplug/STEAL storm; a report in a function
# of the series fails it (tests/vm/test_kcsan.py). Not in CI: too slow.
test-kcsan: setup
	@k=$$($(STAGE) build-kcsan-kernel scripts/build-kernel.sh kcsan); \
	SCHEDSTEAL_KERNEL_KCSAN="$$k" \
		$(STAGE) vm-tests-kcsan $(PY) -m pytest -q -s --durations=0 -m kcsan tests/vm/test_kcsan.py

# Some topics alone (TOPICS=prep,park): their test and debug kernels, in
# trees of their own, every tier of the stealing, parking and governor
# tests but those of the jump-label kernel, and the placement tests (the
# wakeup's idle set, recent_used_cpu, NUMA); a test that needs a topic left
# out is skipped (its `topics` marker). Not in CI: each choice is two more
# kernels.
test-topics: setup
	@case "$(TOPICS)" in ""|all) echo "make test-topics: name the topics, e.g. TOPICS=prep,park" >&2; exit 2 ;; esac; \
	t=$$($(STAGE) build-test-kernel scripts/build-kernel.sh test) || exit 1; \
	d=$$($(STAGE) build-debug-kernel scripts/build-kernel.sh debug) || exit 1; \
	q=$$(scripts/build-qemu.sh --path) || exit 1; \
	SCHEDSTEAL_TOPICS="$(TOPICS)" SCHEDSTEAL_KERNEL_TEST="$$t" SCHEDSTEAL_KERNEL_DEBUG="$$d" \
	SCHEDSTEAL_QEMU_LAB="$$q" \
		$(STAGE) vm-tests-topics $(PY) -m pytest -q -rs --durations=0 --durations-min=10 -m "not kcsan" -k "not jumplabel" \
		tests/vm/test_steal.py tests/vm/test_park.py tests/vm/test_governor.py \
		tests/vm/test_placement.py

# The parking and stealing tests with the jump-label kernel in place of the
# test kernel (single-threaded TCG: slower, so not part of `make test`).
test-jump-label: setup
	@j=$$($(STAGE) build-jumplabel-kernel scripts/build-kernel.sh jumplabel); \
	SCHEDSTEAL_KERNEL_TEST="$$j" SCHEDSTEAL_KERNEL_JUMPLABEL="$$j" \
		$(STAGE) vm-tests-jump-label $(PY) -m pytest -q --durations=0 --durations-min=10 \
		tests/vm/test_park.py tests/vm/test_steal.py -k "not debug"

fresh-check:
	@$(STAGE) fresh-check-$(or $(FRESH),setup) scripts/fresh-check.sh $(or $(FRESH),setup)

rebase-check: setup
	@$(STAGE) rebase-check scripts/rebase-check.sh $(if $(BUMP),--bump) $(if $(BUILD),--build)

bisect-check: setup
	@$(STAGE) bisect-check scripts/bisect-check.sh

worktree: setup
	@scripts/worktree.sh

export-patches:
	@scripts/export-patches.sh

checkpatch: setup
	@scripts/checkpatch.sh

clean-build:
	rm -rf $(CACHE)/build
