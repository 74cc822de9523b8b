# l4spark: every target sets up its own environment first (Python 3.11 and Java 17 needed).
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
FLEET  ?= out/demo-fleet
WAREHOUSE ?= warehouse
SEED   ?= 7
export SPARK_LOCAL_IP := 127.0.0.1

.PHONY: setup demo test bench parse-accuracy clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH"; exit 1; }
	@command -v java >/dev/null || { echo "need Java 17+ (java) on PATH"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

# Generate the demo fleet (once) and parse it into ./warehouse.
demo: setup
	test -d $(FLEET) || $(VENV)/bin/l4spark simulate --out $(FLEET) --seed $(SEED)
	$(VENV)/bin/l4spark parse --logs-root $(FLEET) --warehouse $(WAREHOUSE)

test: setup
	$(PY) -m pytest -q

# Throughput: a multi-GB generated fleet; full parse vs single-process drain3 vs raw Spark scan.
bench: setup
	$(PY) -m l4spark.bench $(BENCH_ARGS)

# Grouping accuracy on the 8 Loghub-2k systems: Spark pipeline vs single-process drain3.
parse-accuracy: setup
	$(PY) -m l4spark.loghub

clean:
	rm -rf out $(WAREHOUSE) spark-warehouse .pytest_cache
