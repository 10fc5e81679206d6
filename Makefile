# torch_accinte — every entry point of the repository. `make help` lists them.

PYTHON ?= python3
BUILD := build
# The supported PyTorch releases (requirements/torch.txt): every stage is
# built and tested against the first, the installed one; `make test-compat`
# runs the final stage's whole suite against each of the others.
SUPPORTED_TORCH := $(patsubst torch==%,%,$(shell grep '^torch==' requirements/torch.txt))
COMPAT_TORCH := $(wordlist 2,$(words $(SUPPORTED_TORCH)),$(SUPPORTED_TORCH))
# TORCH_VERSION=X.Y.Z builds and tests against that release instead of the
# installed one: in a virtual environment and a build tree of its own, so the
# two never mix (`TORCH_VERSION=2.14.1 make test-stage STAGE=03`).
TORCH_VERSION ?=
ifneq ($(TORCH_VERSION),)
VENV := build/venv-torch-$(TORCH_VERSION)
PYTHON := $(VENV)/bin/python
BUILD := build/torch-$(TORCH_VERSION)
endif
CMAKE_DIR := $(BUILD)/cmake
DOCS_DIR := $(BUILD)/docs
JOBS ?= 2

# Chapter directories are discovered: chapters/NN_name -> stage NN.
CHAPTER_DIRS := $(sort $(patsubst %/CMakeLists.txt,%,$(wildcard chapters/[0-9][0-9]_*/CMakeLists.txt)))
STAGES := $(foreach dir,$(CHAPTER_DIRS),$(firstword $(subst _, ,$(notdir $(dir)))))
FINAL_STAGE := $(lastword $(STAGES))
STAGE ?= $(FINAL_STAGE)

# Tests of chapter NN live in tests/chNN_*; those of chapters <= STAGE run
# against stage STAGE.
chapter_tests = $(wildcard tests/ch$(1)_*)
tests_up_to = $(foreach n,$(STAGES),$(if $(filter $(n),$(firstword $(sort $(n) $(1)))),$(call chapter_tests,$(n))))
PYTEST := $(PYTHON) -m pytest -q
# The long suites end with their slowest tests, which is where `make test`'s
# time is won back (docs/reliability/test_time.md). NB: not test-stages, whose
# output the chapter pages show.
SLOWEST := --durations=15

.PHONY: help deps configure build stage test-stage test-stages test-compat test-emulator \
        test-emulator-sanitized test-sanitized fuzz docs docs-check docs-browser-test outputs \
        outputs-check test-final test-unsanitized flake-check conformance test-conformance \
        format-check install demo test clean bench final-stage bench-snapshot profile-snapshot \
        sanitized-build check upstream-tests

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | \
	  awk 'BEGIN {FS = ":.*## "}; {printf "  make %-24s %s\n", $$1, $$2}'
	@echo "  Stages: $(STAGES) (final: $(FINAL_STAGE)); pick one with STAGE=NN"

deps: $(BUILD)/.deps ## Install missing Debian and pinned pip packages
$(BUILD)/.deps: tools/install_deps.sh requirements/torch.txt requirements/build.txt requirements/test.txt requirements/docs.txt
	PYTHON=$(PYTHON) VENV=$(VENV) TORCH_VERSION=$(TORCH_VERSION) tools/install_deps.sh
	@mkdir -p $(BUILD) && touch $@

# NB: the trees of the extra releases are compiled without debug information
# (a third of their compile time); they exist to run the suite.
configure: deps
	cmake -S . -B $(CMAKE_DIR) -G Ninja -DACCINTE_STAGE_ROOT=$(CURDIR)/$(BUILD) \
	  -DACCINTE_DEBUG_INFO=$(if $(TORCH_VERSION),OFF,ON) \
	  -DPython3_EXECUTABLE=$$($(PYTHON) -c 'import sys; print(sys.executable)') >/dev/null

build: configure ## Build the emulator and every stage
	cmake --build $(CMAKE_DIR) -j $(JOBS)

stage: configure ## Build stage STAGE into build/stageNN/python
	cmake --build $(CMAKE_DIR) -j $(JOBS) --target stage$(STAGE)
	@echo "stage $(STAGE): PYTHONPATH=$(BUILD)/stage$(STAGE)/python"

# The final stage alone: what the targets that test only it build. Its
# objects are every chapter's; the earlier stages would add only their links
# and their trees (about 100 MB each), which nothing there runs.
final-stage: configure
	cmake --build $(CMAKE_DIR) -j $(JOBS) --target stage$(FINAL_STAGE)

test-stage: stage ## Run the tests of chapters 01..STAGE against stage STAGE
	PYTHONPATH=$(BUILD)/stage$(STAGE)/python $(PYTEST) $(call tests_up_to,$(STAGE))

test-emulator: ## Build the emulator alone (no PyTorch) and run its gtests
	cmake -S common -B $(BUILD)/emulator -G Ninja >/dev/null
	cmake --build $(BUILD)/emulator -j $(JOBS)
	ctest --test-dir $(BUILD)/emulator --output-on-failure -j $(JOBS)

test-emulator-sanitized: ## The emulator gtests under ASan + UBSan, then under TSan
	cmake -S common -B $(BUILD)/emulator-asan -G Ninja -DACCINTE_SANITIZE=address >/dev/null
	cmake --build $(BUILD)/emulator-asan -j $(JOBS)
	ctest --test-dir $(BUILD)/emulator-asan --output-on-failure -j $(JOBS)
	cmake -S common -B $(BUILD)/emulator-tsan -G Ninja -DACCINTE_SANITIZE=thread >/dev/null
	cmake --build $(BUILD)/emulator-tsan -j $(JOBS)
	ctest --test-dir $(BUILD)/emulator-tsan --output-on-failure -j $(JOBS)

# The sanitized build: the final stage (every chapter's objects) with ASan +
# UBSan, in a tree of its own. PyTorch and Python are not instrumented:
# tools/sanitizer/run.sh preloads the sanitizer runtime and holds its options.
SANITIZED := $(BUILD)/sanitized

sanitized-build: deps ## Build the final stage with ASan + UBSan into build/sanitized/
	cmake -S . -B $(SANITIZED)/cmake -G Ninja -DACCINTE_SANITIZE=address \
	  -DACCINTE_STAGE_ROOT=$(CURDIR)/$(SANITIZED) \
	  -DPython3_EXECUTABLE=$$($(PYTHON) -c 'import sys; print(sys.executable)') >/dev/null
	cmake --build $(SANITIZED)/cmake -j $(JOBS) --target stage$(FINAL_STAGE)

test-sanitized: sanitized-build ## The final stage under ASan + UBSan, its whole suite with the runtime preloaded
	@# NB: --capture=sys: a sanitizer report is written to file descriptor 2,
	@# which pytest's default capture would swallow with the process.
	PYTHONPATH=$(SANITIZED)/stage$(FINAL_STAGE)/python tools/sanitizer/run.sh \
	  $(PYTEST) $(SLOWEST) --capture=sys $(call tests_up_to,$(FINAL_STAGE))

# The emulator's C API under libFuzzer (common/fuzz/api_fuzzer.cpp), built
# with clang, ASan and UBSan. Every input of the seed corpus and every kept
# crash (common/fuzz/regressions/) runs first; then new inputs for
# FUZZ_SECONDS, kept in build/fuzz/corpus between runs.
FUZZ_SECONDS ?= 60
FUZZ_DIR := $(BUILD)/fuzz
fuzz: deps ## Fuzz the emulator's C API for FUZZ_SECONDS (default 60)
	cmake -S common -B $(FUZZ_DIR) -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
	  -DACCINTE_SANITIZE=address -DACCINTE_BUILD_TESTS=OFF -DACCINTE_BUILD_FUZZER=ON >/dev/null
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target accinte_api_fuzzer
	mkdir -p $(FUZZ_DIR)/corpus
	$(FUZZ_DIR)/accinte_api_fuzzer -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
	  -timeout=30 -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/ \
	  $(FUZZ_DIR)/corpus common/fuzz/corpus common/fuzz/regressions

outputs: build ## Regenerate the example outputs the guide shows
	$(PYTHON) tools/generate_outputs.py

# TEST_LOGS=dir: each chapter's test run is taken from the logs a
# `make test-stages` kept there instead of being run again (`make test`).
outputs-check: build ## Fail if a stored example output is out of date
	$(PYTHON) tools/generate_outputs.py --check $(if $(TEST_LOGS),--test-logs $(TEST_LOGS))

docs: deps ## Build the HTML guide (warnings are errors)
	$(PYTHON) tools/check_tags.py
	mkdir -p $(DOCS_DIR)
	ACCINTE_DOCS_BUILD=$(CURDIR)/$(DOCS_DIR) doxygen docs/Doxyfile
	ACCINTE_DOCS_BUILD=$(CURDIR)/$(DOCS_DIR) doxygen docs/Doxyfile.chapters
	@# NB: the doctrees (Sphinx's pickled state) stay out of the published html/.
	rm -rf $(DOCS_DIR)/html/.doctrees
	ACCINTE_DOCS_BUILD=$(DOCS_DIR) $(PYTHON) -m sphinx -W --keep-going -n -q -d $(DOCS_DIR)/doctrees -b html . $(DOCS_DIR)/html
	$(PYTHON) tools/check_links.py --html $(DOCS_DIR)/html
	@echo "The guide is at $(CURDIR)/$(DOCS_DIR)/html/index.html"

docs-browser-test: docs ## Open every page of the guide in headless Chromium and check it
	$(PYTHON) tools/browser_test.py

format-check: ## clang-format check of every C and C++ source (also part of docs-check)
	tools/check_format.sh

docs-check: ## Tag checker, link checker, output wrapping, benchmark report and measured-number self-tests, measured numbers against their snapshot, PyTorch links table, clang-format check
	$(PYTHON) tools/check_tags.py --self-test
	$(PYTHON) tools/check_tags.py
	$(PYTHON) tools/check_links.py --self-test
	$(PYTHON) tools/browser_test.py --self-test
	$(PYTHON) tools/timed_steps.py --self-test
	$(PYTHON) docs/_ext/accinte_pytorch.py --check
	$(PYTHON) tools/generate_outputs.py --self-test
	$(PYTHON) benchmarks/bench_report.py --self-test
	$(PYTHON) tools/check_numbers.py --self-test
	$(PYTHON) tools/check_numbers.py
	tools/check_format.sh

# The guide cannot run the benchmarks (too slow, too noisy): its performance
# page renders BENCH_SNAPSHOT, a copy of a `make bench` run committed with it.
BENCH_DIR := $(BUILD)/bench
BENCH_SNAPSHOT := docs/output/bench_results.json

bench: stage ## Time stage STAGE against the CPU into build/bench/ (BUILD_TIMES=1: build and test times too)
	cmake -S common -B $(BUILD)/emulator -G Ninja >/dev/null
	cmake --build $(BUILD)/emulator -j $(JOBS) --target accinte_launch_latency
	PYTHONPATH=$(BUILD)/stage$(STAGE)/python $(PYTHON) benchmarks/bench.py --stage $(STAGE) \
	  --out $(BENCH_DIR) --jobs $(JOBS) $(if $(BUILD_TIMES),--build-times) \
	  --emulator-latency $(BUILD)/emulator/accinte_launch_latency

bench-snapshot: ## Copy the last `make bench` results to the guide's performance page
	cp $(BENCH_DIR)/results.json $(BENCH_SNAPSHOT)
	@$(PYTHON) tools/check_numbers.py >/dev/null || { $(PYTHON) tools/check_numbers.py; \
	  echo "bench-snapshot: the prose above states numbers the new snapshot does not hold: rewrite it before committing"; exit 1; }

# Chapter 12's page draws its profile table and timeline from a stored
# profile, since a profile's times change from run to run.
PROFILE_SNAPSHOT := chapters/12_profiler/output/trace_snapshot.json
profile-snapshot: ## Profile chapter 12's training step again and store it for its page
	$(MAKE) --no-print-directory stage STAGE=12
	PYTHONPATH=$(BUILD)/stage12/python $(PYTHON) chapters/12_profiler/output/profile_step.py \
	  --snapshot $(PROFILE_SNAPSHOT)

install: build ## pip install the final backend (torch_accinte)
	$(PYTHON) -m pip install -q --no-build-isolation --no-deps .

demo: deps install ## Install everything, run the quickstart, build the guide
	cd examples && $(PYTHON) quickstart.py
	$(MAKE) --no-print-directory docs

# Each stage's own chapter tests run against that stage alone (proving the
# chapter needs nothing later), then all tests run against the final stage,
# including the install of the package into a fresh virtual environment.
# NB: each chapter's pytest output and exit status are kept in
# STAGE_TEST_LOGS/NN.txt and NN.status (sh has no pipefail): the chapter
# pages show that run, and `make test`'s outputs-check reads it from there
# instead of running every chapter's tests a second time.
STAGE_TEST_LOGS := $(BUILD)/test-stages
test-stages: build ## Each chapter's tests against its own stage
	@rm -rf $(STAGE_TEST_LOGS) && mkdir -p $(STAGE_TEST_LOGS)
	@set -e; for n in $(STAGES); do \
	  echo "== chapter $$n tests against stage $$n (torch $$($(PYTHON) -c 'import torch; print(torch.__version__)'))"; \
	  { PYTHONPATH=$(BUILD)/stage$$n/python $(PYTEST) tests/ch$${n}_* \
	      && echo 0 > $(STAGE_TEST_LOGS)/$$n.status \
	      || echo $$? > $(STAGE_TEST_LOGS)/$$n.status; } | tee $(STAGE_TEST_LOGS)/$$n.txt; \
	  exit_status=$$(cat $(STAGE_TEST_LOGS)/$$n.status); \
	  test "$$exit_status" -eq 0 || exit "$$exit_status"; \
	done

# Every chapter's tests, the real workloads (tests/workloads) and the
# conformance kit's and the upstream runner's own tests (tests/conformance,
# tests/upstream), against
# the final stage. NB: the install into a fresh venv builds with setup.py in
# build/cmake, the installed torch's tree: it runs only without TORCH_VERSION.
FINAL_TESTS = $(call tests_up_to,$(FINAL_STAGE)) tests/workloads tests/conformance tests/upstream
test-final: final-stage ## All tests and the workloads against the final stage, the install into a fresh venv included
	ACCINTE_TEST_INSTALL=$(if $(TORCH_VERSION),0,1) PYTHONPATH=$(BUILD)/stage$(FINAL_STAGE)/python \
	  $(PYTEST) $(SLOWEST) $(FINAL_TESTS)

# What of test-final the sanitized run cannot stand for: the workloads and
# the conformance kit's tests, as users run them, and the install tests,
# which build with the compilers and pip (no sanitizer runtime preloaded
# into those). `make test` runs this and test-sanitized instead of
# test-final: together they are test-final's suite, and its chapter tests
# run once, sanitized, instead of twice.
INSTALL_TESTS := tests/ch06_autoload/test_install_states.py \
                 tests/ch06_autoload/test_autoload.py::test_the_installed_package_autoloads
test-unsanitized: build ## The workloads, the kit's and the install tests against the final stage (the rest of test-final is test-sanitized's)
	ACCINTE_TEST_INSTALL=1 PYTHONPATH=$(BUILD)/stage$(FINAL_STAGE)/python \
	  $(PYTEST) $(SLOWEST) tests/workloads tests/conformance tests/upstream $(INSTALL_TESTS)

# Each extra release in a virtual environment and trees of its own:
# compat-build-X.Y.Z builds the final stage against torch X.Y.Z,
# compat-test-X.Y.Z runs the final stage's whole suite there. test-compat
# runs them for every release in COMPAT_TORCH, JOBS at a time (a release's
# suite once its build has passed), each step's output printed whole when
# it ends: two suites on two cores, which their tests must stand as they
# stand `make flake-check`'s load.
compat-build-%:
	$(MAKE) --no-print-directory TORCH_VERSION=$* final-stage

compat-test-%: compat-build-%
	$(MAKE) --no-print-directory TORCH_VERSION=$* test-final

COMPAT_STEPS := $(foreach v,$(COMPAT_TORCH),compat-build-$(v)) \
                $(foreach v,$(COMPAT_TORCH),compat-test-$(v):compat-build-$(v))
STEP_RUNNER = $(PYTHON) tools/timed_steps.py --make "$(MAKE) --no-print-directory" \
  --slots $(JOBS) --logs $(BUILD)/steps
test-compat: ## The final stage's whole suite against each of torch $(COMPAT_TORCH), side by side
	@$(STEP_RUNNER) --name "make test-compat" $(COMPAT_STEPS)

# The conformance kit (conformance/, shipped in every stage as
# torch_accinte.conformance) against each stage of CONFORMANCE_STAGES, each
# held to the stage contract (--expect-stage NN: the checks of chapters <= NN
# pass, the later ones fail); reports in CONFORMANCE_DIR/NN.{md,json}.
# `make test` runs it on TEST_CONFORMANCE_STAGES only: two stages whose
# contracts cut through the middle of the kit. NB: not the final stage:
# tests/conformance/test_kit.py holds it to the contract, renamed to
# kitdev, in every release's suite; a second run here would check the
# same kit against the same tree under the other name.
CONFORMANCE_STAGES ?= $(STAGES)
TEST_CONFORMANCE_STAGES ?= 04 10
CONFORMANCE_DIR := $(BUILD)/conformance
conformance: build ## The conformance kit against every stage (CONFORMANCE_STAGES), checking the stage contract
	$(PYTHON) tools/run_conformance.py --build $(BUILD) --out $(CONFORMANCE_DIR) $(CONFORMANCE_STAGES)

test-conformance: build ## The conformance kit against stages TEST_CONFORMANCE_STAGES (what `make test` runs)
	$(PYTHON) tools/run_conformance.py --build $(BUILD) --out $(CONFORMANCE_DIR) $(TEST_CONFORMANCE_STAGES)

# PyTorch's own device-generic test files (UPSTREAM_FILES, under
# PYTORCH_SRC/test) for the CPU and accinte, each file and device in a
# process of its own, against the final stage with accinte's device test
# base (torch_accinte.testing); fails on a failure its list does not name
# or on an entry that no longer fails (docs/upstream_tests.md). NB: not part
# of `make test`: PyTorch's sources are not ours to fetch or copy.
PYTORCH_SRC ?=
UPSTREAM_FILES ?=
UPSTREAM_DIR := $(BUILD)/upstream-tests
upstream-tests: ## PyTorch's device-generic tests on CPU and accinte (needs PYTORCH_SRC=<PyTorch tree at the installed tag>)
	@if [ -z "$(PYTORCH_SRC)" ]; then \
	  echo "make upstream-tests needs PYTORCH_SRC=<a PyTorch source tree at the tag of the installed torch>: its test/ holds the files to run ($(or $(UPSTREAM_FILES),the runner's default set))." >&2; \
	  exit 2; fi
	@$(MAKE) --no-print-directory final-stage
	PYTHONPATH=$(BUILD)/stage$(FINAL_STAGE)/python $(PYTHON) -m torch_accinte.testing \
	  --pytorch-src "$(PYTORCH_SRC)" --out $(UPSTREAM_DIR) $(if $(UPSTREAM_FILES),--files $(UPSTREAM_FILES))

# What `make test` runs. Each step is a target, followed by the steps it
# waits for (`STEP:AFTER,...`); tools/timed_steps.py runs them JOBS at a
# time, the first ready step of the list first, starts nothing after a
# failure, and ends, pass or fail, with a table of each step's seconds and
# the total against the budgets. NB: the machine stays busy, so the order
# only decides what runs last: the long suites, one thread each, must start
# as early as their builds allow. So the builds of the trees they run in
# (each already JOBS wide) come first and one after the other; then the
# suites, the longest chain first; the short steps fill what is left. The
# steps that use build/stageNN (test-stages, outputs-check,
# test-unsanitized, test-conformance: each rebuilds or reads those trees,
# and the install tests rebuild the final one) wait for each other; every
# other step has trees of its own. outputs-check reads the chapter test runs
# test-stages keeps (TEST_LOGS) instead of running them again.
# $(call one_after_another,a b c) is `a b:a c:b`.
one_after_another = $(firstword $(1)) $(call _after,$(firstword $(1)),$(wordlist 2,$(words $(1)),$(1)))
_after = $(if $(2),$(firstword $(2)):$(1) $(call _after,$(firstword $(2)),$(wordlist 2,$(words $(2)),$(2))))
BUILD_LANE := build sanitized-build $(foreach v,$(COMPAT_TORCH),compat-build-$(v))
TEST_STEPS := $(call one_after_another,$(BUILD_LANE)) \
              test-stages:build $(call _after,test-stages,outputs-check test-unsanitized test-conformance) \
              $(foreach v,$(COMPAT_TORCH),compat-test-$(v):compat-build-$(v)) \
              test-sanitized:sanitized-build \
              docs-check test-emulator test-emulator-sanitized fuzz docs-browser-test
# The budgets `make test` reports against, in minutes: on a machine of the
# project's kind (2 cores), from a clean clone, with ccache and pip's cache
# empty (cold) or filled by an earlier run (warm).
# docs/reliability/test_time.md keeps the last measurement of each.
TEST_BUDGETS := cold=60 warm=30

test: deps ## Everything CI runs (TEST_STEPS), with the seconds of each step at the end
	@TEST_LOGS=$(STAGE_TEST_LOGS) $(STEP_RUNNER) --name "make test" \
	  $(foreach b,$(TEST_BUDGETS),--budget $(b)) $(TEST_STEPS)

# The develop loop: the docs checks, the emulator's gtests and the tests of
# chapter STAGE against its own stage (a few minutes once built).
check: docs-check test-emulator stage ## Docs checks, emulator gtests and chapter STAGE's own tests against stage STAGE
	PYTHONPATH=$(BUILD)/stage$(STAGE)/python $(PYTEST) $(call chapter_tests,$(STAGE))

# Flakiness made visible: TESTS (pytest node ids or files, against STAGE)
# and OUTPUTS (output/ scripts, against their own stage), N runs of each,
# FLAKE_JOBS at a time beside FLAKE_LOAD CPU-burning processes.
N ?= 20
FLAKE_JOBS ?= 2
FLAKE_LOAD ?= 1
flake-check: ## Run TESTS and/or OUTPUTS N times (20), 2 at a time under CPU load; fail if any run failed
	@test -n "$(TESTS)$(OUTPUTS)" || { echo "usage: make flake-check TESTS='tests/... node ids' OUTPUTS='chapters/.../output/x.py' N=20 [STAGE=NN]"; exit 2; }
	$(PYTHON) tools/flake_check.py --stage $(STAGE) -n $(N) --jobs $(FLAKE_JOBS) \
	  --load $(FLAKE_LOAD) --logs $(BUILD)/flake-check $(TESTS) $(OUTPUTS)

clean: ## Remove build/
	rm -rf $(BUILD)
