"""hr1-jax: a JAX/TPU-native reimplementation of Harness-R1."""
from setuptools import find_packages, setup

# Pinned to the set probed together on the reference machine (see docs/ in shared and README):
# transformers 5.x needs jinja2 listed explicitly for chat templates.
INSTALL_REQUIRES = [
    "jax==0.10.2",
    "jaxlib==0.10.2",
    "flax==0.12.8",
    "optax==0.2.8",
    "orbax-checkpoint==0.12.8",
    "grain==0.2.18",
    "transformers==5.24.0",
    "tokenizers==0.23.3",
    "safetensors==0.8.0",
    "sentencepiece==0.2.3",
    "Jinja2==3.1.6",
    "ml_collections==1.1.0",
    "absl-py",
    "tensorboard==2.21.0",
    "numpy==2.4.6",
    "tqdm",
    # DBBench talks to a real MariaDB server; PyMySQL is pure Python (no client library needed).
    "PyMySQL>=1.1",
    # Sandboxed hooks' `re` runs on `regex` (re-compatible) for its matcher timeout (hr1_jax/patch).
    "regex>=2022.1.18",
    # The OpenAI-compatible client (targets, teacher, endpoint engineers): a keep-alive connection
    # pool (urllib opened one TCP connection per request); <0.29 because the per-request deadline
    # plugs a network backend into the httpcore pool httpx 0.28 keeps (hr1_jax/agents/http.py).
    "httpx>=0.28,<0.29",
]

EXTRAS = {
    # torch is a test-only dependency (Hugging Face PyTorch parity); the exact pin takes the local
    # CPU wheel instead of a multi-GB CUDA build. pyflakes lints the teacher's hook programs as code.
    "test": ["pytest>=8", "torch==2.13.0", "pyflakes>=3", "ray==2.60.0"],
    # The real ALFWorld/TextWorld engine (compiles fast-downward from source, ~5 min on 2 cores).
    # textworld pinned: envs/alfworld/engine_memo.py memoises parts of its engine that it was checked against.
    "alfworld": ["alfworld==0.4.2", "textworld[pddl]==1.7.0"],
    # Evaluation reports: plots embedded in report.html.
    "eval": ["matplotlib"],
    # rollout.backend=ray: rerun workers as Ray actors, on machines beside the training hosts
    # (launch/ray_cluster.sh). Also in "test", so CI runs the Ray backend's tests.
    "ray": ["ray==2.60.0"],
}
EXTRAS["all"] = sorted({p for v in EXTRAS.values() for p in v})
# Accelerator runtimes for the pinned jax (jax 0.10.2's own `tpu` / `cuda12` extras, with the versions
# they resolve to written out). One per machine, so neither is in "all"; `DEVICE=tpu|cuda bash
# launch/setup.sh` installs them. The CUDA extra brings the CUDA 12 / cuDNN libraries as pip wheels.
EXTRAS["tpu"] = ["jax[tpu]==0.10.2", "jaxlib==0.10.2", "libtpu==0.0.42.1"]
EXTRAS["cuda"] = ["jax[cuda12]==0.10.2", "jaxlib==0.10.2", "jax-cuda12-plugin[with-cuda]==0.10.2",
                  "jax-cuda12-pjrt==0.10.2"]

setup(
    name="hr1_jax",
    version="0.1.0",
    description="Harness-R1 in JAX: train a harness engineer with SFT and online GRPO on real reruns",
    python_requires=">=3.11",
    # The repo's top-level configs/ ships inside the package as hr1_jax/configs (`--config=demo`
    # resolves there in an installed wheel; a checkout uses configs/ directly).
    packages=find_packages(include=["hr1_jax", "hr1_jax.*", "envs", "envs.*"]) + ["hr1_jax.configs"],
    package_dir={"hr1_jax.configs": "configs"},
    # Shipped data lives in non-package folders (envs/*/data, reference patches, tokenizer assets),
    # selected by these patterns only: include_package_data would also scan the file manifest and
    # warn once per data folder that Python could import as a namespace package.
    package_data={"": ["*.json", "*.jsonl", "*.md", "*.txt", "*.model", "*.tar.xz", "*.gz", "**/*.json",
                       "**/*.jsonl", "**/*.md", "**/*.txt", "**/*.model", "**/*.tar.xz", "**/LICENSE*"]},
    include_package_data=False,
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["hr1=hr1_jax.cli:main"]},
)
