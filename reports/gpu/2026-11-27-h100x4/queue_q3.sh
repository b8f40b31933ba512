#!/usr/bin/env bash
# GPU 3: the engine benchmark (loop vs raw; vLLM vs SGLang vs transformers), then SGLang training without its memory saver.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
R=/root/work; export CUDA_VISIBLE_DEVICES=3
echo "start $(date -u +%T)"
bench() {  # engine model tag
  ( source .gpu/dev.sh "$([[ $1 == sglang ]] && echo sglang || echo vllm)"
    python3 scripts/bench/bench_engine_loop.py --engine "$1" --model "$2" --data "$TRAIN_FILE" --questions 32 --n 4 \
      --attempts 3 --response-length 1024 --max-new-tokens-per-turn 48 --rounds 2 --json $R/bench/$1-$3.json ) \
    > $R/logs/bench-$1-$3.log 2>&1; echo "bench $1 $3 rc=$? $(date -u +%T)"
}
source .gpu/dev.sh vllm >/dev/null
bench vllm "$TINY" tiny
bench vllm $R/q05b q05b
bench sglang $R/q05b q05b
bench hf $R/q05b q05b
bench sglang "$TINY" tiny
( source .gpu/dev.sh sglang
  ROLLOUT_ENGINE=sglang N_GPUS_PER_NODE=1 STEPS=4 GPU_MEMORY_UTILIZATION=0.5 RUN_DIR=$R/runs/tiny-sglang-1gpu \
    bash scripts/gpu_check.sh data.filter_overlong_prompts=False actor_rollout_ref.rollout.free_cache_engine=False \
    ++actor_rollout_ref.rollout.engine_kwargs.sglang.enable_memory_saver=False ) > $R/logs/tiny-sglang-1gpu.log 2>&1
echo "tiny-sglang-1gpu rc=$? $(date -u +%T)"
touch $R/logs/q3.done
