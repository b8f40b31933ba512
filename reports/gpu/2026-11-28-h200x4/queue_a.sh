#!/usr/bin/env bash
# GPU 0: SGLang with its memory saver on (SGLANG_MEMORY_SAVER=1), make gpu-check's run: the tiny policy, 4 steps and
# a resume (learning rate 1e-4: real rewards, non-zero updates). If it fails, the same with SGLang's CUDA graphs off
# (one suspect of the crash at the 2nd weight sync seen in session 1). Then the 0.5B shape (real vocabulary) the same
# way, with an entropy bonus so that its random weights get a non-zero update too.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
W=/root/work; export CUDA_VISIBLE_DEVICES=0 MR_SEARCH_CACHE=$W/cache
eval "$(bash scripts/gpu/offline_site.sh env $W/site)"
echo "start $(date -u +%T)"
extra=()
ROLLOUT_ENGINE=sglang SGLANG_MEMORY_SAVER=1 TOTAL_STEPS=4 RUN_DIR=$W/runs/tiny-sglang-saver \
  bash scripts/gpu_check.sh >$W/logs/tiny-sglang-saver.log 2>&1
rc=$?
echo "tiny-sglang-saver rc=$rc $(date -u +%T)"
if ((rc != 0)); then
  extra=(++actor_rollout_ref.rollout.engine_kwargs.sglang.disable_cuda_graph=True)
  ROLLOUT_ENGINE=sglang SGLANG_MEMORY_SAVER=1 TOTAL_STEPS=4 RUN_DIR=$W/runs/tiny-sglang-saver-nograph \
    bash scripts/gpu_check.sh "${extra[@]}" >$W/logs/tiny-sglang-saver-nograph.log 2>&1
  echo "tiny-sglang-saver-nograph rc=$? $(date -u +%T)"
fi
python3 -m mr_search.shaped_model --shape qwen2.5-0.5b --out $W/q05b >$W/logs/shape05b.log 2>&1
echo "0.5b built rc=$? $(date -u +%T)"
ROLLOUT_ENGINE=sglang SGLANG_MEMORY_SAVER=1 MODEL_PATH=$W/q05b ENTROPY_COEFF=0.001 TRAIN_BATCH_SIZE=8 TOTAL_STEPS=4 \
  RUN_DIR=$W/runs/q05b-sglang-saver bash scripts/gpu_check.sh "${extra[@]}" >$W/logs/q05b-sglang-saver.log 2>&1
echo "q05b-sglang-saver rc=$? $(date -u +%T)"
touch $W/logs/a.done
