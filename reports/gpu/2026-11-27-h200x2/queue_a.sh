#!/usr/bin/env bash
# GPU 0 (session 5): make gpu-check (vLLM, tiny, 1 GPU: the 0.05 s replay poll), the engine bench (tiny, 128 x 4)
# against one BM25 process and against 4 HTTP fronts, then the paper preset (SGLang, 0.5B shape) for 2 steps.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
R=/root/work; export CUDA_VISIBLE_DEVICES=0
echo "start $(date -u +%T)"
( source .gpu/dev.sh vllm >/dev/null
  ROLLOUT_ENGINE=vllm N_GPUS_PER_NODE=1 RUN_DIR=$R/runs/tiny-vllm-1gpu-poll bash scripts/gpu_check.sh \
    data.filter_overlong_prompts=False > $R/logs/tiny-vllm-1gpu-poll.log 2>&1; echo "gpu_check rc=$? $(date -u +%T)" )
( source .gpu/dev.sh vllm >/dev/null
  RETRIEVER_TYPE=bm25 RETRIEVER_DEVICE=cpu RETRIEVER_PORT=8001 RETRIEVER_HTTP_WORKERS=4 setsid nohup bash retrieval_launch.sh \
    > $R/logs/retrieval-8001.log 2>&1 < /dev/null &
  for i in $(seq 90); do curl -s -o /dev/null http://127.0.0.1:8001/health && break; sleep 2; done
  for url in http://127.0.0.1:8000/retrieve http://127.0.0.1:8001/retrieve; do
    tag=$([[ $url == *8001* ]] && echo fronts4 || echo one)
    python3 scripts/bench/bench_engine_loop.py --engine vllm --model "$TINY" --data "$TRAIN_FILE" --questions 128 --n 4 \
      --attempts 3 --response-length 1024 --max-new-tokens-per-turn 48 --rounds 3 --retriever-url $url \
      --json $R/bench/vllm-tiny-q128-$tag.json > $R/logs/bench-vllm-tiny-q128-$tag.log 2>&1; echo "bench $tag rc=$? $(date -u +%T)"
  done )
( source .gpu/dev.sh sglang >/dev/null
  PRESET=paper MODEL_PATH=$R/q05b TRAIN_FILE=$TRAIN_FILE VAL_FILE=$VAL_FILE ROLLOUT_ENGINE=sglang N_GPUS_PER_NODE=1 \
    TRAIN_BATCH_SIZE=8 PPO_MINI_BATCH_SIZE=8 TOTAL_STEPS=2 SAVE_FREQ=-1 TEST_FREQ=-1 RUN_DIR=$R/runs/paper-q05b-sglang \
    bash train_grpo_step.sh trainer.val_before_train=False data.filter_overlong_prompts=False \
    > $R/logs/paper-q05b-sglang.log 2>&1; echo "paper rc=$? $(date -u +%T)" )
touch $R/logs/a.done
