"""Config section `target`: the frozen target agent (reference spec §0, §4.4)."""
import ml_collections

from hr1_jax.config import require

KINDS = ("scripted", "openai")
TOKEN_LIMIT_FIELDS = ("max_completion_tokens", "max_tokens")


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.kind = "scripted"
    c.name = "scripted-v1"          # recorded in baselines; reruns must use the same target
    # OpenAI-compatible endpoint (kind=openai).
    c.base_url = ""
    c.model = ""
    c.api_key_env = "OPENAI_API_KEY"
    c.temperature = 0.0
    c.max_tokens = 4096
    c.tool_choice = "auto"
    c.timeout_s = 120.0              # one request in total (connect to last byte), however slow the server
    c.retry_budget_s = 600.0         # one call: every attempt and back-off
    c.max_retries = 3
    c.max_response_bytes = 4 << 20   # a longer reply is a target protocol error, never stored
    c.max_content_chars = 200_000    # characters of one reply kept (content, tool calls); past it cut
    c.concurrency = 8
    c.enable_thinking = False        # the chat_template_kwargs value, where vllm_fields sends it
    # vLLM/SGLang-only request fields (chat_template_kwargs): unset = sent when GET /models says the
    # server is vLLM, SGLang or hr1 serve (hosted APIs answer 400 to them); true/false force it.
    c.vllm_fields = ml_collections.FieldReference(None, field_type=bool)
    c.token_limit_field = "max_completion_tokens"   # or max_tokens (older servers)
    c.omit_fields = ""               # request fields left out, e.g. "temperature" for GPT-5-style models
    # Scripted simulator (kind=scripted): failure-mode rates and hint compliance.
    c.scripted = ml_collections.ConfigDict()
    c.scripted.skill = 0.6           # probability of acting like a competent agent at each step
    c.scripted.hint_follow_prob = 0.7
    return c


def validate(c, config) -> None:
    require(c.kind in KINDS, "target.kind", f"must be one of {KINDS}")
    if c.kind == "openai":
        require(bool(c.base_url), "target.base_url", "required when target.kind='openai'")
        require(bool(c.model), "target.model", "required when target.kind='openai'")
        require(c.base_url.startswith(("http://", "https://")), "target.base_url",
                "must start with http:// or https://")
    require(c.timeout_s > 0, "target.timeout_s", "must be > 0")
    require(c.retry_budget_s >= c.timeout_s, "target.retry_budget_s",
            "must be >= target.timeout_s (room for one whole attempt)")
    require(c.max_response_bytes >= 1024, "target.max_response_bytes", "must be >= 1024")
    require(c.max_content_chars >= 1, "target.max_content_chars", "must be >= 1")
    require(c.max_retries >= 0, "target.max_retries", "must be >= 0")
    require(c.concurrency >= 1, "target.concurrency", "must be >= 1")
    require(c.token_limit_field in TOKEN_LIMIT_FIELDS, "target.token_limit_field",
            f"must be one of {TOKEN_LIMIT_FIELDS}")
    require(0.0 <= c.scripted.skill <= 1.0, "target.scripted.skill", "must be in [0, 1]")
    require(0.0 <= c.scripted.hint_follow_prob <= 1.0, "target.scripted.hint_follow_prob", "must be in [0, 1]")
