#!/usr/bin/env python3
"""Check that every relative link in README.md and docs/ resolves.

A link `[text](path)` or `[text](path#anchor)` (images too) must name a file of the
repository, relative to the page; an anchor into a Markdown page must be one of its
headings, slugged as GitHub does. Links with a scheme (https:, mailto:) are not followed.
Exits non-zero and lists every broken link.

    scripts/check-doc-links.py
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")  # the text may span lines
FENCE = re.compile(r"^(```|~~~)")


def strip_code(text):
    """The page without fenced blocks and inline code spans, where brackets are not links."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else re.sub(r"`[^`]*`", "", line))
    return out


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(page):
    """The anchors of a page's headings, numbered as GitHub numbers repeated ones."""
    seen, result, fenced = {}, set(), False
    for line in page.read_text().splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1).replace("`", ""))
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else f"{base}-{n}")
    return result


def main():
    pages = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
    broken = []
    for page in pages:
        text = "\n".join(strip_code(page.read_text()))
        rel = page.relative_to(ROOT)
        for m in LINK.finditer(text):
            target, lineno = m.group(1), text.count("\n", 0, m.start()) + 1
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{rel}:{lineno}: {target}: no such file")
            elif not dest.is_relative_to(ROOT):
                broken.append(f"{rel}:{lineno}: {target}: outside the repository")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{rel}:{lineno}: {target}: no heading #{anchor}")
    for b in broken:
        print(b)
    print(f"{len(pages)} pages, {len(broken)} broken links")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
