# libinbox — the two commands: `make demo` and `make test`.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
TSAN_BUILD ?= build-tsan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
PREFIX     ?= /usr/local

.PHONY: all deps deps-fuzz build build-asan build-tsan test test-fast chaos \
	demo bench fuzz install deb clean format docs

all: build

deps:
	@if [ "$$(id -u)" -eq 0 ]; then sh scripts/install-deps.sh; \
	else echo "make deps: not root, skipping package installation"; fi

# Clang and its libFuzzer runtime, for `make fuzz` only.
deps-fuzz:
	@if [ "$$(id -u)" -eq 0 ]; then sh scripts/install-deps.sh --fuzz; \
	else echo "make deps-fuzz: not root, skipping package installation"; fi

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

# The man page and docs/cli.md's generated blocks, from the command table
# of src/cli/main.c (the cli_docs test checks they are up to date).
docs: build
	$(BUILD)/src/cli/inbox gen-docs man >docs/inbox.1
	$(BUILD)/src/cli/inbox gen-docs md <docs/cli.md >docs/cli.md.new
	mv docs/cli.md.new docs/cli.md

build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DINBOX_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	cmake --build $(ASAN_BUILD) -j$(JOBS)

# ThreadSanitizer: only what the tests labelled tsan need (the threaded
# ones: tests/run-suite.sh runs just those in this build).
TSAN_TARGETS = inbox_cli inbox-test-provider kafka-mock kafka-produce \
	nats_publish amqp-publish test_nats_source test_providers
build-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINBOX_TSAN=ON $(CMAKE_FLAGS) >/dev/null
	cmake --build $(TSAN_BUILD) -j$(JOBS) --target $(TSAN_TARGETS)

# Builds three times (plain, ASan+UBSan, and the threaded tests under
# TSan), starts every server the tests need on 127.0.0.1 in a temp dir,
# runs the whole suite against the first two and the tsan-labelled tests
# against the third, stops the servers by PID.
test: build build-asan build-tsan
	sh tests/run-suite.sh $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)

# Only the plain build (quicker while developing).
test-fast: build
	sh tests/run-suite.sh $(BUILD)

# The chaos matrix (tests/chaos/run.sh, docs/reliability.md): every store x
# source under SIGKILLs, PostgreSQL and broker restarts, backend
# terminations and SIGSTOPs, then the checker. Bounded by CHAOS_MINUTES
# (default 10); CHAOS_CELLS="pg+amqp sqlite+jsonl" narrows it. Not part
# of make test.
chaos: build
	sh tests/chaos/run.sh $(BUILD)

demo: build
	sh scripts/demo.sh $(BUILD)

bench: build
	sh bench/run $(BUILD)

# The fuzz targets of tests/fuzz/ built with Clang's libFuzzer, ASan and
# UBSan (in $(FUZZ_BUILD)), each run for FUZZ_SECONDS (default 60), one
# after the other; prints each target's executions. Not part of `make
# test` (which runs the seed corpora as regression tests).
fuzz: deps-fuzz
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzzers
	sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# Installing never installs packages (no `deps`): PREFIX (default
# /usr/local) is given at install time, so it is not kept in the build's
# cache for a later install; DESTDIR (staging, packaging) is honoured.
install:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j$(JOBS)
	cmake --install $(BUILD) --prefix $(PREFIX)

# Debian packages (inbox, libinbox0.1, libinbox-dev) with debhelper, from
# a copy of the tree: build-deb/*.deb (packaging/make-deb.sh). Like
# install, it installs no package.
DEB_BUILD ?= build-deb
deb: deps
	sh packaging/make-deb.sh $(DEB_BUILD) $(JOBS)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD) $(DEB_BUILD)
