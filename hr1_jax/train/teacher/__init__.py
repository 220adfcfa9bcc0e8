"""Teachers that write SFT targets: the template teacher (embedded default) and an
OpenAI-compatible endpoint; `build_sft_rows` keeps only patches that are valid, fully re-evaluated
and have delta >= min_delta (reference cold-start filter)."""
from hr1_jax.train.teacher.build import build_sft_rows, make_teacher
from hr1_jax.train.teacher.endpoint import EndpointTeacher
from hr1_jax.train.teacher.template import TemplateTeacher

__all__ = ["EndpointTeacher", "TemplateTeacher", "build_sft_rows", "make_teacher"]
