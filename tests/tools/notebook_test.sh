#!/bin/sh
# Executes a notebook top to bottom with Debian's jupyter nbconvert; fails when
# a cell raises. Exits 77 (CTest: skipped) with a message when jupyter,
# matplotlib or pandas are missing.
#   notebook_test.sh RINGMASTER_BIN OUTPUT_DIR NOTEBOOK
PY=${RINGMASTER_PYTHON:-/usr/bin/python3}
if ! "$PY" -c "import nbconvert, ipykernel, matplotlib, pandas" 2>/dev/null; then
  echo "SKIPPED: $PY lacks nbconvert, ipykernel, matplotlib or pandas" \
       "(Debian: jupyter-nbconvert python3-ipykernel python3-matplotlib python3-pandas)"
  exit 77
fi
mkdir -p "$2" || exit 1
RINGMASTER_BIN="$1" RINGMASTER_NOTEBOOK_OUT="$2" MPLBACKEND=module://matplotlib_inline.backend_inline \
  exec timeout 600 "$PY" -m jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=300 \
  --output-dir "$2" "$3"
