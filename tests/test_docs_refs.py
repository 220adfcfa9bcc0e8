"""Every section a code comment cites ("reference spec §4.2", "spec §1.7", "§2.4",
"environments.md §2c") is a heading of the document in docs/ that holds it, so no citation points
outside the repository."""
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCANNED = ("hr1_jax", "envs", "configs", "tests", "benchmarks", "launch")
DOCS = {"reference": REPO / "docs/reference.md", "environments": REPO / "docs/environments.md"}
SIGN = "\u00a7"  # written escaped so this file cites nothing itself
_CITE = re.compile(SIGN + r"\s*(\d+(?:\.\d+)?[a-z]?)")
_HEADING = re.compile(r"^#{1,4} " + SIGN + r"(\d+(?:\.\d+)?[a-z]?) ", re.M)


def citations(text: str) -> list[tuple[str, str]]:
    """[(document, section)] cited in a text. A citation belongs to environments.md when that name
    stands between it and the previous citation on its line, else to the reference spec; a bare
    number continues its line's previous document ("§1.2, §1.3")."""
    out = []
    for line in text.splitlines():
        doc, last = "reference", 0
        for m in _CITE.finditer(line):
            before = line[last:m.start()]
            if "environments.md" in before:
                doc = "environments"
            elif re.search(r"spec|reference", before):
                doc = "reference"
            out.append((doc, m.group(1)))
            last = m.end()
    return out


def headings(doc: str) -> set[str]:
    return set(_HEADING.findall(DOCS[doc].read_text(encoding="utf-8")))


def cited(root: Path) -> dict[tuple[str, str], list[str]]:
    """{(document, section): [files citing it]} over the scanned folders of root."""
    found: dict[tuple[str, str], list[str]] = {}
    for top in SCANNED:
        for f in sorted((root / top).rglob("*")):
            if f.suffix in (".py", ".md", ".sh") and f.is_file() and "data" not in f.relative_to(root).parts:
                for cite in citations(f.read_text(encoding="utf-8", errors="replace")):
                    found.setdefault(cite, []).append(str(f.relative_to(root)))
    return found


def unresolved(found: dict) -> dict:
    return {c: files[:3] for c, files in found.items() if c[1] not in headings(c[0])}


def test_every_cited_section_is_a_heading_in_docs():
    found = cited(REPO)
    assert len(found) > 20  # the scan sees the code's citations
    assert not unresolved(found), f"cited sections with no heading in docs/: {unresolved(found)}"


def test_sections_are_numbered_once():
    for doc, path in DOCS.items():
        numbers = _HEADING.findall(path.read_text(encoding="utf-8"))
        assert len(numbers) == len(set(numbers)), doc


@pytest.mark.parametrize("text, want", [
    (f"(reference spec {SIGN}2.3-{SIGN}2.4)", [("reference", "2.3"), ("reference", "2.4")]),
    (f"(reference spec {SIGN}4.1, environments.md {SIGN}2c)", [("reference", "4.1"), ("environments", "2c")]),
    (f"(environments.md {SIGN}1b, reference spec {SIGN}4.2)", [("environments", "1b"), ("reference", "4.2")]),
    (f"packet ({SIGN}1.3), rows (spec {SIGN}1.2, {SIGN}8)", [("reference", "1.3"), ("reference", "1.2"),
                                                            ("reference", "8")]),
])
def test_citation_parsing(text, want):
    assert citations(text) == want


def test_a_citation_without_a_heading_is_found(tmp_path):
    (tmp_path / "hr1_jax").mkdir()
    (tmp_path / "hr1_jax/x.py").write_text(f"# spec {SIGN}1.7, {SIGN}12.9; environments.md {SIGN}3e, {SIGN}9z\n")
    assert unresolved(cited(tmp_path)) == {("reference", "12.9"): ["hr1_jax/x.py"],
                                           ("environments", "9z"): ["hr1_jax/x.py"]}
