#!/usr/bin/env bash
# GPU 1 (session 6): SGLang tiny 128 x 4 with 8 loop workers and 0; then the three engines on the 0.5B shape, same GPU,
# 8 workers, and their side-by-side report (tokens/s of SGLang vs vLLM vs the transformers rollout).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
R=/root/work; export CUDA_VISIBLE_DEVICES=1
for w in 8 0; do
  ( source .gpu/dev.sh sglang >/dev/null
    python3 scripts/bench/bench_engine_loop.py --engine sglang --model "$TINY" --data "$TRAIN_FILE" --questions 128 --n 4 \
      --attempts 3 --response-length 1024 --max-new-tokens-per-turn 48 --rounds 3 --loop-workers $w \
      --json $R/bench/sglang-tiny-q128-w$w.json > $R/logs/bench-sglang-tiny-q128-w$w.log 2>&1; echo "sglang w$w rc=$? $(date -u +%T)" )
done
for e in vllm sglang hf; do
  ( source .gpu/dev.sh $([[ $e == sglang ]] && echo sglang || echo vllm) >/dev/null
    python3 scripts/bench/bench_engine_loop.py --engine $e --model $R/q05b --data "$TRAIN_FILE" --questions 32 --n 4 \
      --attempts 3 --response-length 1024 --max-new-tokens-per-turn 48 --rounds 3 --loop-workers 8 \
      --json $R/bench/$e-q05b-w8.json > $R/logs/bench-$e-q05b-w8.log 2>&1; echo "$e q05b rc=$? $(date -u +%T)" )
done
( source .gpu/dev.sh vllm >/dev/null; python3 scripts/bench/bench_engine_loop.py --report $R/bench/{vllm,sglang,hf}-q05b-w8.json \
  > $R/logs/engines-q05b.txt 2>&1 )
touch $R/logs/b.done
