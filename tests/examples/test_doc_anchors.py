"""Every link from the README or docs/ to a heading (`file.md#anchor`, `#anchor`) lands on a
heading that exists, by GitHub's rule for anchors."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)#\s]*\.md)?#([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated one numbered."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = None if fenced else re.match(r"#{1,6}\s+(.*)", line)
        if heading is None:
            continue
        anchor = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found


def test_every_link_to_a_heading_lands_on_one() -> None:
    broken = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for link in LINK.finditer(doc.read_text()):
            target = doc.parent / link.group(1) if link.group(1) else doc
            if not target.is_file() or link.group(2) not in _anchors(target):
                broken.append(f"{doc.relative_to(ROOT)}: {link.group(0)}")
    assert broken == []
