#!/usr/bin/env bash
# Builds (once; cached under $MR_SEARCH_CACHE) everything the embedded default needs: the world, its verl parquet,
# the dense and BM25 retrieval indexes, the tiny policy and its supervised warm start (the first build: ~2-7 min on
# a 2-core CPU). Each piece is keyed by its inputs, so a re-run costs seconds and a changed piece is rebuilt.
set -euo pipefail
PYTHON="${PYTHON:-python}"
export MR_SEARCH_CACHE="${MR_SEARCH_CACHE:-$HOME/.cache/mr_search}"

echo "prepare: the embedded world, its parquet, the retrieval indexes and the warm-started tiny policy"
"$PYTHON" -m mr_search_embedded.prepare all
