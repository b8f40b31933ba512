#!/usr/bin/env bash
# GPU 3: retrieval at wiki-18 scale (issue 17, the streamed design after the change), then the engine benchmark.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
R=/root/work; export CUDA_VISIBLE_DEVICES=3
echo "start $(date -u +%T)"
( source .gpu/dev.sh vllm >/dev/null
  python3 scripts/bench/bench_retrieval_gpu.py --multiproc-only --http-workers 4 \
    --multiproc-concurrency 32,256,256,256,1024 --duration 15 ) > $R/logs/bench-retrieval-gpu.log 2>&1
echo "bench-retrieval-gpu rc=$? $(date -u +%T)"
bench() {  # engine model tag
  ( source .gpu/dev.sh "$([[ $1 == sglang ]] && echo sglang || echo vllm)" >/dev/null
    python3 scripts/bench/bench_engine_loop.py --engine "$1" --model "$2" --data "$TRAIN_FILE" --questions 32 --n 4 \
      --attempts 3 --response-length 1024 --max-new-tokens-per-turn 48 --rounds 3 --json $R/bench/$1-$3.json ) \
    > $R/logs/bench-$1-$3.log 2>&1; echo "bench $1 $3 rc=$? $(date -u +%T)"
}
bench vllm "$TINY" tiny
bench sglang $R/q05b q05b
bench vllm $R/q05b q05b
touch $R/logs/c.done
