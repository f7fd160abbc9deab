# neurorefiner — `make help` lists the targets.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export WANDB_MODE ?= offline
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: help install install-viewer demo test test-fast test-vllm serve-vlm bench tables-synthetic ablations-synthetic docs-tables lint format clean

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}'

$(STAMP): pyproject.toml constraints/cpu.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel
	# CPU install: pin the CPU wheel of torch through the constraints file (GPU users skip it).
	$(BIN)/pip install -q -c constraints/cpu.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) ## make .venv and install the package with dev extras on the CPU torch

demo: install ## the main job: refine the shipped U-Net mask of a real DIADEM test stack, print before/after
	$(BIN)/python -m neurorefiner.cli.demo

install-viewer: install ## add the viewer extra (napari, PyQt5, pytest-qt): the review plugin and its headless test
	$(BIN)/pip install -q -c constraints/cpu.txt -e '.[viewer]'

test: install ## run the whole test suite (what CI runs)
	$(BIN)/python -m pytest -q tests

test-fast: install ## unit tests only, skip tests marked slow
	$(BIN)/python -m pytest -q -m "not slow" tests

test-vllm: install ## the vlm agents against a running server (NEUROREFINER_VLM_BASE_URL, NEUROREFINER_VLM_MODEL); not in CI
	$(BIN)/python -m pytest -q -m vllm tests/integration/test_vlm_live.py

serve-vlm: ## print the vLLM command the vlm agents are written against (needs a GPU machine with vLLM)
	@echo "pip install -e '.[serve]'   # on a GPU machine, beside a CUDA torch"
	@echo "vllm serve Qwen/Qwen3-VL-8B-Instruct --max-model-len 16384 --limit-mm-per-prompt '{\"image\":4,\"video\":0}'"
	@echo "then: python refine.py image=IMG mask=MASK agent=vlm agent.base_url=http://HOST:8000/v1"
	@echo "the three models of Table 4, the fake server used in tests, faults and retries: docs/vlm_server.md"

bench: install ## run the benchmarks (figures and ratios against references measured in the same run)
	$(BIN)/python -m bench.run $(BENCH_ARGS)

tables-synthetic: install ## the SYNTHETIC Tables 1-2 (all four stand-ins, every row on the U-Net's and the nnU-Net-style masks; TABLE_ARGS="limit=3" for a quick look)
	WANDB_MODE=offline $(BIN)/python evaluate.py -m experiment=table_1_synthetic_cwmbs_weak,table_1_synthetic_cwmbs_noise,table_2_synthetic_bigneuron,table_2_synthetic_zbfwb segmenter=unet3d,nnunet_style $(TABLE_ARGS)

ablations-synthetic: install ## Figure 5 and Table 3 on the SYNTHETIC stand-ins, each with its preset's refiner (conf/refiner/), and Table 6 on zbfwb (trains its six variants first, about 1 CPU-hour)
	WANDB_MODE=offline $(BIN)/python evaluate.py -m experiment=figure_5_iterations_synthetic_zbfwb,table_3_agents_synthetic_zbfwb,figure_5_iterations_synthetic_cwmbs_noise,table_3_agents_synthetic_cwmbs_noise,figure_5_iterations_synthetic_bigneuron,table_3_agents_synthetic_bigneuron $(TABLE_ARGS)
	bash experiments/table_6_toporefinenet/run_synthetic.sh $(TABLE_ARGS)
	bash experiments/table_6_toporefinenet/probe_synthetic.sh

docs-tables: install ## rewrite the figure tables of README.md and docs/results.md from the experiments/ CSVs (DOCS_ARGS=--check: only compare)
	$(BIN)/neurorefiner make doc-tables $(DOCS_ARGS)

lint: install ## ruff
	$(BIN)/ruff check .  # package, tests, bench, experiments/, entry points; pyproject excludes data/

format: install ## ruff format + import sort
	$(BIN)/ruff check --fix .  # the same tree as lint

clean: ## remove caches (not .venv)
	rm -rf .pytest_cache .ruff_cache outputs multirun data/cache
