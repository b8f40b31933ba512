#!/usr/bin/env bash
# GPU 3: the engine benchmark (loop vs raw replay; the tags as stop token ids by default, as strings in phase 4).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
R=/root/work; export CUDA_VISIBLE_DEVICES=3
echo "start $(date -u +%T)"
bench() {  # engine model tag
  ( source .gpu/dev.sh "$([[ $1 == sglang ]] && echo sglang || echo vllm)" >/dev/null
    python3 scripts/bench/bench_engine_loop.py --engine "$1" --model "$2" --data "$TRAIN_FILE" --questions 32 --n 4 \
      --attempts 3 --response-length 1024 --max-new-tokens-per-turn 48 --rounds 3 --json $R/bench/$1-$3.json ) \
    > $R/logs/bench-$1-$3.log 2>&1; echo "bench $1 $3 rc=$? $(date -u +%T)"
}
source .gpu/dev.sh vllm >/dev/null
bench vllm "$TINY" tiny
bench vllm $R/q05b q05b
bench sglang $R/q05b q05b
bench sglang "$TINY" tiny
touch $R/logs/c.done
