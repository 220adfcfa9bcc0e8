"""Training the harness engineer: cold-start SFT and online GRPO with real reruns.

  losses.py      GRPO group advantages, PPO-clip / TIS / KL / entropy loss (numerator, denominator)
  state.py       train state, AdamW + schedules, optimiser-state shardings
  ce_step.py     plain sharded next-token CE step + ShardedTrainer (equality tests, model benchmarks)
  sft_step.py    jitted sharded SFT step (prefill-protocol loss mask, grad accumulation)
  step.py        step plumbing both learners share: chunked fp32 log-probs, [A, M] batch shardings, jit
  grpo_step.py   jitted sharded GRPO update (micro-batch scan, exact gradient accumulation)
  data.py        grain pipelines: benchmark-pure RL prompt groups, bucketed SFT batches, rollout buffer
  checkpoint.py  orbax CheckpointManager: state + RNG key + data-iterator state, async, resume
  engine.py      mesh + tokenizer + model (+ stage handoff / HF export) + sampler weight moves
  sft.py         `hr1 sft` loop;  grpo.py  `hr1 grpo` loop;  cli.py  `hr1 teacher|sft|grpo` stages
  teacher/       template teacher (program library, packet signals), endpoint teacher, SFT-row filter
  evaluate.py    held-out scoring of an engineer with the paired-rerun reward
  compact.py     compact prompts + code-block tokenizer symbols for the tiny CPU demo engineer
  demo.py        `hr1 demo`: the embedded default end to end
"""
