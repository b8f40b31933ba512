#!/usr/bin/env bash
# Downloads the wheels of an offline install (requirements/offline-ENGINE.txt) for GPU nodes without network, on a
# machine that has network. The nodes need the same Python minor version and an x86-64 glibc Linux.
#
#   bash scripts/gpu/wheelhouse.sh vllm wheelhouse/            # or sglang; PYTHON_VERSION=3.12 by default
#
# Then on the node: pip install --no-index --no-deps --find-links wheelhouse/ -r requirements/offline-ENGINE.txt
#                   pip install --no-index --no-deps wheelhouse/mr_search-*.whl
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ENGINE="${1:?usage: wheelhouse.sh vllm|sglang OUT_DIR}"
OUT="${2:?usage: wheelhouse.sh vllm|sglang OUT_DIR}"
PYTHON="${PYTHON:-python3}"
PYTHON_VERSION="${PYTHON_VERSION:-3.12}"     # the nodes' Python (the GPU image measured here: 3.12)
case "$ENGINE" in vllm|sglang) ;; *) echo "wheelhouse.sh: ENGINE=$ENGINE is not valid; use vllm or sglang" >&2; exit 2 ;; esac
requirements="$ROOT/requirements/offline-$ENGINE.txt"
mkdir -p "$OUT"
platforms=()
for tag in manylinux1 manylinux2014 manylinux_2_17 manylinux_2_24 manylinux_2_27 manylinux_2_28 manylinux_2_31 \
  manylinux_2_34 manylinux_2_35; do platforms+=(--platform "${tag}_x86_64"); done
# antlr4-python3-runtime 4.9.3 (omegaconf's parser) exists only as a source archive: built once into a wheel here.
grep -v '^antlr4-python3-runtime' "$requirements" >"$OUT/.binary-requirements.txt"
"$PYTHON" -m pip download --no-deps --only-binary=:all: --implementation cp --python-version "$PYTHON_VERSION" \
  "${platforms[@]}" -d "$OUT" -r "$OUT/.binary-requirements.txt"
"$PYTHON" -m pip wheel --no-deps -w "$OUT" "$(grep '^antlr4-python3-runtime' "$requirements")"
"$PYTHON" -m pip wheel --no-deps -w "$OUT" "$ROOT"
rm -f "$OUT/.binary-requirements.txt"
echo "wheelhouse.sh: $(ls "$OUT"/*.whl | wc -l) wheels in $OUT for Python $PYTHON_VERSION ($ENGINE)"
