"""Config section `train`: SFT, GRPO, teacher, checkpoints and the embedded demo (spec §6, §7)."""
import ml_collections

from envs.registry import benchmark, training_order
from hr1_jax.config import require

AGG_MODES = ("token-mean", "seq-mean-token-mean")
KL_ESTIMATORS = ("k1", "k2", "k3")
TEACHERS = ("template", "endpoint")
DEMO_TASK_FIELDS = ("train_split", "train_tasks", "heldout_split", "heldout_tasks", "val_split")


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.seed = 42
    c.rows = ""                     # RL rows JSONL (grpo) — "" = <workdir>/rows/rl_grouped.jsonl (hr1 build-rows)
    c.sft_rows = ""                 # SFT rows JSONL (sft) — "" = <workdir>/rows/sft_rows.jsonl
    c.init_checkpoint = ""          # engineer to start from: orbax run dir or HF folder; "" = model.*
    c.logprob_chunk_size = 1024     # sequence chunk of the chunked fp32 log-prob computation
    c.peak_flops_per_device = 0.0   # for MFU in TensorBoard (e.g. 459e12 TPU v5p bf16); 0 = not reported

    c.sft = ml_collections.ConfigDict()
    c.sft.lr = 1e-5
    c.sft.epochs = 2
    c.sft.warmup_ratio = 0.03
    c.sft.weight_decay = 0.0
    c.sft.grad_clip = 1.0
    c.sft.batch_size = 4            # samples per micro-batch (global, across devices)
    c.sft.grad_accum = 4            # micro-batches per optimiser update
    c.sft.max_seq_len = 32768
    c.sft.buckets = (4096, 8192, 16384, 32768)   # padded lengths (few shapes = few compiles)
    c.sft.save_every = 200
    c.sft.log_every = 1

    c.grpo = ml_collections.ConfigDict()
    c.grpo.prompts_per_step = 4
    c.grpo.samples_per_prompt = 8
    c.grpo.global_batch = 32
    c.grpo.iterations = 4           # optimiser updates per rollout batch (minibatch = global/iterations)
    c.grpo.buffer_epochs = 1        # passes over the rollout buffer per step
    c.grpo.micro_batch = 8          # samples per gradient-accumulation micro-batch
    c.grpo.num_steps = 174          # rollout steps (reference NUM_ROLLOUT)
    c.grpo.temperature = 0.7
    c.grpo.top_p = 0.95
    c.grpo.top_k = 0
    c.grpo.lr = 1e-6
    c.grpo.weight_decay = 0.1
    c.grpo.beta2 = 0.98
    c.grpo.grad_clip = 1.0
    c.grpo.eps_clip = 0.2
    c.grpo.eps_clip_high = 0.28
    c.grpo.tis_cap = 2.0            # truncated IS cap (<= 0: off)
    c.grpo.kl_coef = 0.0
    c.grpo.kl_estimator = "k1"
    c.grpo.entropy_coef = 0.0
    c.grpo.agg_mode = "seq-mean-token-mean"
    c.grpo.std_normalize = True
    c.grpo.adv_eps = 1e-6
    c.grpo.dynamic_sampling = False   # drop zero-variance groups and over-sample to refill
    c.grpo.max_resample_rounds = 2
    c.grpo.max_prompt_tokens = 28672
    c.grpo.max_response_tokens = 12288
    c.grpo.save_every = 16
    c.grpo.eval_every = 8           # validation (greedy, fixed rows) every N steps, when validation rows exist
    # reward/vs_start_greedy: one greedy decode + rerun of every train row before step 1 (the demo's
    # 100 rows: seconds; a 9B run's thousands: skip)
    c.grpo.start_greedy_baseline = False
    c.grpo.permute_rewards = False  # null control: shuffle each round's rewards across its samples

    c.teacher = ml_collections.ConfigDict()
    c.teacher.kind = "template"
    c.teacher.base_url = ""         # OpenAI-compatible endpoint for kind=endpoint
    c.teacher.model = ""
    c.teacher.api_key_env = "OPENAI_API_KEY"
    c.teacher.max_tokens = 12288
    c.teacher.temperature = 0.0
    c.teacher.timeout_s = 600.0
    c.teacher.retries = 3
    c.teacher.concurrency = 8       # endpoint requests in flight (the reference's 8)
    # vLLM/SGLang-only fields (prefill, chat_template_kwargs): unset = sent when the server is one
    c.teacher.vllm_fields = ml_collections.FieldReference(None, field_type=bool)
    c.teacher.token_limit_field = "max_completion_tokens"   # or max_tokens
    c.teacher.omit_fields = ""      # request fields left out, e.g. "temperature,top_p" for GPT-5-style models
    c.teacher.candidates = 3        # template variants scored per row; the best with delta >= 0 is kept
    c.teacher.min_delta = 0.0
    c.teacher.keep = "best"         # best: one SFT row per row (its best candidate); all: every qualifying one

    # `hr1 demo`: task sets per benchmark (train rows for SFT/GRPO, held-out rows for the table), each
    # benchmark's from its descriptor (`demo`), in training's order.
    c.demo = ml_collections.ConfigDict()
    demos = {name: benchmark(name).demo for name in training_order() if benchmark(name).demo is not None}
    c.demo.benchmarks = tuple(demos)
    c.demo.vocab_size = 1024
    # <part>_seeds: target seeds a part's batches are rolled out under (more packets from the same
    # tasks); val_*: GRPO's validation rows (checkpoint choice), "" tasks = no validation set
    common = dict(heldout_seeds=(0,), val_tasks="", val_seeds=(0,), batch_size=5, train_seeds=(0,))
    for name, demo in demos.items():
        c.demo[name] = ml_collections.ConfigDict(dict(common, **{f: getattr(demo, f) for f in DEMO_TASK_FIELDS}))
    c.demo.grpo_seeds = (0,)        # one GRPO run per seed from the same SFT engineer; the table averages them
    c.demo.grpo_params = "best"     # best: each run's validation-chosen best_params (final_params without one)
    c.demo.eval_samples = 4         # sampled held-out metric: samples per batch at the GRPO temperature

    c.checkpoint = ml_collections.ConfigDict()
    c.checkpoint.max_to_keep = 2
    c.checkpoint.async_save = True
    c.checkpoint.export_hf = True   # write an HF folder at the end of a stage
    return c


def validate(c, config) -> None:
    g = c.grpo
    require(g.prompts_per_step * g.samples_per_prompt == g.global_batch, "train.grpo.global_batch",
            "must equal train.grpo.prompts_per_step * train.grpo.samples_per_prompt")
    require(g.global_batch % g.iterations == 0, "train.grpo.global_batch",
            "must be divisible by train.grpo.iterations")
    require((g.global_batch // g.iterations) % g.micro_batch == 0, "train.grpo.micro_batch",
            "must divide the minibatch train.grpo.global_batch / train.grpo.iterations")
    require(g.samples_per_prompt >= 2, "train.grpo.samples_per_prompt", "GRPO needs >= 2 samples per prompt")
    require(0 < g.top_p <= 1, "train.grpo.top_p", "must be in (0, 1]")
    require(g.temperature > 0, "train.grpo.temperature", "must be > 0")
    require(0 <= g.eps_clip < 1 and g.eps_clip_high >= 0, "train.grpo.eps_clip", "clip bounds out of range")
    require(g.agg_mode in AGG_MODES, "train.grpo.agg_mode", f"must be one of {AGG_MODES}")
    require(g.kl_estimator in KL_ESTIMATORS, "train.grpo.kl_estimator", f"must be one of {KL_ESTIMATORS}")
    require(g.kl_coef >= 0, "train.grpo.kl_coef", "must be >= 0")
    require(g.num_steps >= 1, "train.grpo.num_steps", "must be >= 1")
    require(g.buffer_epochs >= 1, "train.grpo.buffer_epochs", "must be >= 1")
    require(g.eval_every >= 1, "train.grpo.eval_every", "must be >= 1")
    s = c.sft
    require(s.batch_size >= 1 and s.grad_accum >= 1, "train.sft.batch_size", "batch and accumulation must be >= 1")
    require(s.epochs >= 1, "train.sft.epochs", "must be >= 1")
    require(0 <= s.warmup_ratio < 1, "train.sft.warmup_ratio", "must be in [0, 1)")
    require(len(s.buckets) > 0 and max(s.buckets) <= s.max_seq_len, "train.sft.buckets",
            "need at least one bucket, none longer than train.sft.max_seq_len")
    require(c.teacher.kind in TEACHERS, "train.teacher.kind", f"must be one of {TEACHERS}")
    require(c.teacher.kind != "endpoint" or bool(c.teacher.base_url), "train.teacher.base_url",
            "required when train.teacher.kind='endpoint'")
    require(c.teacher.keep in ("best", "all"), "train.teacher.keep", "must be 'best' or 'all'")
    require(c.teacher.candidates >= 1, "train.teacher.candidates", "must be >= 1")
    require(c.teacher.concurrency >= 1, "train.teacher.concurrency", "must be >= 1")
    require(c.teacher.token_limit_field in ("max_completion_tokens", "max_tokens"), "train.teacher.token_limit_field",
            "must be 'max_completion_tokens' or 'max_tokens'")
    for bench in c.demo.benchmarks:
        require(bench in c.demo, f"train.demo.{bench}", "task sets missing for a demo benchmark")
    require(len(c.demo.grpo_seeds) >= 1, "train.demo.grpo_seeds", "need at least one GRPO seed")
    require(c.demo.grpo_params in ("best", "final"), "train.demo.grpo_params", "must be 'best' or 'final'")
    require(c.demo.eval_samples >= 1, "train.demo.eval_samples", "must be >= 1")
