#!/usr/bin/env bash
# Builds (once; cached under $MR_SEARCH_CACHE) everything the embedded default needs: the world, its
# verl parquet, the dense and BM25 retrieval indexes, the tiny policy and its supervised warm start.
# Each piece is keyed by its inputs, so a re-run costs seconds and a changed piece is rebuilt.
set -euo pipefail
PYTHON="${PYTHON:-python}"
export MR_SEARCH_CACHE="${MR_SEARCH_CACHE:-$HOME/.cache/mr_search}"

echo "prepare_embedded: world, parquet and retrieval indexes"
"$PYTHON" - <<'PY'
from mr_search.data.embedded import ensure_embedded_parquet
from mr_search_retrieval.default_index import embedded_corpus, ensure_index

print(*ensure_embedded_parquet(), sep="\n")
corpus = embedded_corpus()
print(ensure_index(corpus, "dense"))
print(ensure_index(corpus, "bm25"))
PY
echo "prepare_embedded: the warm-started tiny policy"
"$PYTHON" -m mr_search.warmstart | tail -n 1
