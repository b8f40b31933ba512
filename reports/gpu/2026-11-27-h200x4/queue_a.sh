#!/usr/bin/env bash
# GPU 0 (session 6 plan): the engine bench, tiny policy, 128 x 4, vLLM: the loops in 8 worker processes (verl's
# layout, the new default), then in the engine's process (the old layout), then 1 worker (the embedded preset's).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
R=/root/work; export CUDA_VISIBLE_DEVICES=0
source .gpu/dev.sh vllm >/dev/null
for w in 8 0 1; do
  python3 scripts/bench/bench_engine_loop.py --engine vllm --model "$TINY" --data "$TRAIN_FILE" --questions 128 --n 4 \
    --attempts 3 --response-length 1024 --max-new-tokens-per-turn 48 --rounds 3 --loop-workers $w \
    --json $R/bench/vllm-tiny-q128-w$w.json > $R/logs/bench-vllm-tiny-q128-w$w.log 2>&1; echo "bench w$w rc=$? $(date -u +%T)"
done
touch $R/logs/a.done
