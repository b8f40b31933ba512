#!/usr/bin/env bash
# GPU 1 (session 5): SGLang at real width (0.5B shape, 1 GPU, 2 steps + resume: gpu_check.sh), then the paper preset's
# evaluation of a 7B-shaped policy through vLLM on one GPU (eval_engine.sh, 64 questions, K_eval 3).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
R=/root/work; export CUDA_VISIBLE_DEVICES=1
echo "start $(date -u +%T)"
( source .gpu/dev.sh sglang >/dev/null
  ROLLOUT_ENGINE=sglang N_GPUS_PER_NODE=1 MODEL_PATH=$R/q05b TRAIN_BATCH_SIZE=32 GPU_MEMORY_UTILIZATION=0.4 \
    RUN_DIR=$R/runs/q05b-sglang-1gpu bash scripts/gpu_check.sh data.filter_overlong_prompts=False \
    > $R/logs/q05b-sglang-1gpu.log 2>&1; echo "q05b sglang rc=$? $(date -u +%T)"
  rm -rf $R/runs/q05b-sglang-1gpu/checkpoints )
( source .gpu/dev.sh vllm >/dev/null
  python3 -m mr_search.shaped_model --shape qwen2.5-7b --tokenizer "$TINY" --out $R/q7b > $R/logs/shape7b.log 2>&1 \
    || echo "7b shape failed"
  echo "7b built $(date -u +%T)"
  PRESET=paper MODEL_PATH=$R/q7b VAL_FILE=$VAL_FILE TRAIN_FILE=$TRAIN_FILE ROLLOUT_ENGINE=vllm N_GPUS_PER_NODE=1 K_EVAL=3 \
    MAX_SAMPLES=64 RUN_DIR=$R/runs/eval-q7b-paper-vllm bash scripts/eval_engine.sh data.filter_overlong_prompts=False \
    > $R/logs/eval-q7b-paper-vllm.log 2>&1; echo "eval 7b rc=$? $(date -u +%T)" )
touch $R/logs/b.done
