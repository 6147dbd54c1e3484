"""The seed-parity page (``docs/seed-parity.md``) stays a table a reader can trust.

Every capability row has one of the three statuses the page defines, the rows are numbered without
gaps, a row that is not ``done`` says why, and a deliberate divergence links a row of
``docs/differences.md`` that exists (an ``id`` anchor there, or a heading).
"""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
STATUSES = {"done", "deliberate divergence", "not applicable"}


def _rows() -> list[list[str]]:
    rows = []
    for line in (DOCS / "seed-parity.md").read_text(encoding="utf-8").splitlines():
        if re.match(r"^\| \d+ \|", line):
            rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def _anchors_of_differences() -> set[str]:
    text = (DOCS / "differences.md").read_text(encoding="utf-8")
    ids = set(re.findall(r'<a id="([\w-]+)"></a>', text))
    headings = {
        re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", title.strip().lower()))
        for title in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)
    }
    return ids | headings


def test_rows_are_numbered_once_each_with_five_cells() -> None:
    rows = _rows()
    assert len(rows) > 100, "the table was not found"
    assert [int(r[0]) for r in rows] == list(range(1, len(rows) + 1))
    assert all(len(r) == 5 for r in rows), [r[0] for r in rows if len(r) != 5]


def test_every_row_has_an_allowed_status_and_a_reason_when_not_done() -> None:
    for number, _topic, capability, status, notes in _rows():
        assert capability, number
        assert status in STATUSES, f"row {number}: status {status!r}"
        if status != "done":
            assert notes, f"row {number}: a {status} row says why"


def test_every_divergence_links_an_existing_row_of_differences() -> None:
    anchors = _anchors_of_differences()
    divergences = [r for r in _rows() if r[3] == "deliberate divergence"]
    assert divergences, "no divergence found: the parse is broken"
    for number, *_rest, notes in divergences:
        links = re.findall(r"\(differences\.md#([\w-]+)\)", notes)
        assert links, f"row {number}: a deliberate divergence links its reason in differences.md"
    for number, *_rest, notes in _rows():
        for anchor in re.findall(r"\(differences\.md#([\w-]+)\)", notes):
            assert anchor in anchors, f"row {number}: differences.md has no anchor {anchor!r}"


def test_the_page_is_linked_from_differences_and_the_nav() -> None:
    assert "(seed-parity.md)" in (DOCS / "differences.md").read_text(encoding="utf-8")
    assert "seed-parity.md" in (DOCS.parent / "mkdocs.yml").read_text(encoding="utf-8")
