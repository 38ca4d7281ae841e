#!/usr/bin/env bash
# GACA (or a baseline) on ALFWorld with verl 0.9.1: one trajectory per verl row, played by the
# gaca_text_env agent loop, advantages by gaca.integrations.verl.
#
# UNTESTED ON GPU: this script was written and its pieces tested on CPU only (see docs/verl.md).
#
# Usage:  MODEL=Qwen/Qwen2.5-1.5B-Instruct NGPUS=2 bash examples/verl/run_alfworld.sh [extra hydra overrides]
# Env:    ESTIMATOR=gaca|gigpo|fixed_mix|grpo   (default gaca)
#         KAPPA, W0, NORM                      (GACA settings, the library's option names)
#         DATA=~/data/gaca_alfworld  NNODES=1  NGPUS=8  TP=1  STEPS=150
#         RESPONSE_LEN=12288 (whole episode: all turns + observations)  PROMPT_LEN=2048
#         DRY_RUN=1: only compose and print verl's config (Hydra --cfg job; no Ray, no GPU)
set -euo pipefail

MODEL=${MODEL:-Qwen/Qwen2.5-1.5B-Instruct}
ESTIMATOR=${ESTIMATOR:-gaca}
KAPPA=${KAPPA:-0.25}
W0=${W0:-0.5}
NORM=${NORM:-mean_std}
DATA=${DATA:-$HOME/data/gaca_alfworld}
NNODES=${NNODES:-1}
NGPUS=${NGPUS:-8}
TP=${TP:-1}
STEPS=${STEPS:-150}
PROMPT_LEN=${PROMPT_LEN:-2048}
RESPONSE_LEN=${RESPONSE_LEN:-12288}
NUM_GROUPS=16      # GiGPO reference: 16 groups (games) per iteration ...
GROUP_SIZE=8       # ... x 8 rollouts each
EXPERIMENT=${EXPERIMENT:-alfworld_$(basename "$MODEL")_${ESTIMATOR}}

# Every process verl starts (TaskRunner, rollout and actor workers) imports these modules.
export VERL_USE_EXTERNAL_MODULES=gaca.integrations.verl,gaca.integrations.verl.agent_loop

if [[ -z "${DRY_RUN:-}" && ! -f "$DATA/train.parquet" ]]; then
  python3 "$(dirname "$0")/make_dataset.py" --env alfworld --out "$DATA" --train-games 3000 --val-games 128
fi

# The GACA settings; grpo is verl's own estimator and takes none of them.
GACA_ARGS=()
if [[ "$ESTIMATOR" != "grpo" ]]; then
  GACA_ARGS=(+algorithm.gaca.kappa="$KAPPA" +algorithm.gaca.w0="$W0" +algorithm.gaca.norm="$NORM"
             +algorithm.gaca.layout=trajectory)
fi

HYDRA_ARGS=()
if [[ -n "${DRY_RUN:-}" ]]; then HYDRA_ARGS=(--cfg job --resolve); fi

python3 -m verl.trainer.main_ppo "${HYDRA_ARGS[@]}" \
  trainer.use_v1=False \
  algorithm.adv_estimator="$ESTIMATOR" \
  algorithm.gamma=0.95 \
  algorithm.use_kl_in_reward=False \
  "${GACA_ARGS[@]}" \
  data.train_files="$DATA/train.parquet" \
  data.val_files="$DATA/val.parquet" \
  data.train_batch_size=$NUM_GROUPS \
  data.val_batch_size=128 \
  data.max_prompt_length=$PROMPT_LEN \
  data.max_response_length=$RESPONSE_LEN \
  data.return_raw_chat=True \
  data.shuffle=True \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.model.use_remove_padding=True \
  actor_rollout_ref.model.enable_gradient_checkpointing=True \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.ppo_mini_batch_size=$NUM_GROUPS \
  actor_rollout_ref.actor.use_dynamic_bsz=True \
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=$((PROMPT_LEN + RESPONSE_LEN)) \
  actor_rollout_ref.actor.use_kl_loss=True \
  actor_rollout_ref.actor.kl_loss_coef=0.01 \
  actor_rollout_ref.actor.kl_loss_type=low_var_kl \
  actor_rollout_ref.actor.entropy_coeff=0 \
  actor_rollout_ref.actor.loss_agg_mode=token-mean \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.n=$GROUP_SIZE \
  actor_rollout_ref.rollout.temperature=1.0 \
  actor_rollout_ref.rollout.calculate_log_probs=True \
  actor_rollout_ref.rollout.tensor_model_parallel_size=$TP \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
  actor_rollout_ref.rollout.agent.default_agent_loop=gaca_text_env \
  actor_rollout_ref.rollout.val_kwargs.temperature=0.4 \
  actor_rollout_ref.rollout.val_kwargs.do_sample=True \
  actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True \
  trainer.balance_batch=True \
  trainer.critic_warmup=0 \
  trainer.logger='["console"]' \
  trainer.project_name=gaca_verl \
  trainer.experiment_name="$EXPERIMENT" \
  trainer.nnodes=$NNODES \
  trainer.n_gpus_per_node=$NGPUS \
  trainer.total_training_steps=$STEPS \
  trainer.save_freq=50 \
  trainer.test_freq=10 \
  +ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES="'$VERL_USE_EXTERNAL_MODULES'" \
  "$@"
