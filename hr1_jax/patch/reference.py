"""The real Harness-R1 patches shipped with the package (provenance and license in
`reference_patches/SOURCE.md`): the canonical example, the demo artifacts, and the held-out
patches of three editors × three evidence seeds. Tests validate them, the envs run them, and the
evaluator can score them as a fixed editor."""
import pathlib

REFERENCE_PATCH_DIR = pathlib.Path(__file__).resolve().parent / "reference_patches"
HELDOUT_DIR = REFERENCE_PATCH_DIR / "examples" / "heldout_generalization"
HELDOUT_EDITORS = ("harness-r1", "qwen3.5-397b", "deepseek-v4-pro")   # the three editors shipped
