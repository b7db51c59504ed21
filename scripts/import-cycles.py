#!/usr/bin/env python3
"""List the import circles between the modules of a crate (the engine by default).

Reads every `.rs` file under a crate's `src/`, collects the paths it names
(`use crate::a::b::{c, d::E}` trees, inline `crate::a::b` paths, and `super::`
paths, resolved against the file's own module), maps each path to the deepest
module that exists, and prints the strongly connected components of more than one
member -- a circle of modules that import each other and so cannot be understood
(or moved) one at a time.

Two levels:
  top   -- the crate's top-level modules (`db`, `vlog`, `options`, ...), the
           layering the issue "one home per concept" is about;
  file  -- every file (`db::write`, `vlog::file`, ...).

Code under `#[cfg(test)]` is skipped unless `--tests` is given, and so are the files of
a module declared under it (`#[cfg(test)] mod tests;`): a test may reach anywhere
without making the layers depend on each other.

A path through a `pub use` re-export counts as an edge to the module that defines the
item, not to the re-exporting `mod.rs`.

Usage: scripts/import-cycles.py [--level top|file|both] [--tests] [--edges] [--check]
                                [SRC_DIR ...]
(`--edges` lists every edge, and the edges inside file-level circles.)
SRC_DIR is a crate's `src/` (default crates/engine/src); with several, each is reported
on its own (a crate's modules never import another crate's by `crate::`).

Without `--check` the exit status is 0 whatever was found: the output is the report.
With `--check` it is 1 when any SRC_DIR has a top-level circle (file-level circles are
reported but do not fail it), so that CI can keep the layering from growing a circle
back. Needs only a Python 3 standard library.
"""
import argparse
import os
import re
import sys


def strip_comments_and_strings(text):
    """Blank out comments, string and char literals so that braces and `crate::`
    inside them do not count. Keeps newlines and length roughly (not needed)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            close = '"' + m.group(1)
            j = text.find(close, i + len(m.group(0)))
            i = n if j < 0 else j + len(close)
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'":
            # char literal ('a', '\n', '\'', '{') vs lifetime ('a)
            m = re.match(r"'(\\.|\\u\{[0-9a-fA-F]+\}|[^\\'])'", text[i:])
            if m:
                i += len(m.group(0))
                out.append("' '")
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def drop_cfg_test(text):
    """Remove items annotated `#[cfg(test)]` (a `mod tests { .. }`, a `use`, a fn)."""
    out, i = [], 0
    pat = re.compile(r"#\[cfg\(test\)\]")
    while True:
        m = pat.search(text, i)
        if not m:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:m.start()])
        j = m.end()
        # the item ends at the first `;` before any `{`, or at the matching `}`
        depth = 0
        while j < len(text):
            ch = text[j]
            if ch == ";" and depth == 0:
                j += 1
                break
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    j += 1
                    break
            j += 1
        i = j


def expand_use_tree(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']"""
    tree = re.sub(r"\s+", "", tree)

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += ch == "{"
            depth -= ch == "}"
            cur += ch
        if cur:
            parts.append(cur)
        return parts

    def go(prefix, s):
        k = s.find("{")
        if k < 0:
            s = re.sub(r"\bas\w+$", "", s)  # `Foo as Bar` lost its spaces
            return [prefix + s]
        head, body = s[:k], s[k + 1:s.rfind("}")]
        res = []
        for part in split_top(body):
            res.extend(go(prefix + head, part))
        return res

    return go("", tree)


def module_of_file(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return tuple(rel)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src", nargs="*", default=["crates/engine/src"])
    ap.add_argument("--level", choices=["top", "file", "both"], default="both")
    ap.add_argument("--tests", action="store_true", help="count #[cfg(test)] code too")
    ap.add_argument("--edges", action="store_true", help="also print every edge")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if a top-level circle is found")
    a = ap.parse_args()
    failed = []
    for src in a.src:
        if not os.path.isdir(src):
            ap.error(f"{src}: not a directory")
        if len(a.src) > 1:
            print(f"# {src}")
        if analyse(src, a) and a.check:
            failed.append(src)
    if failed:
        print("top-level import circle(s) in " + ", ".join(failed), file=sys.stderr)
        sys.exit(1)


def analyse(src, a):
    """Prints the report for one crate's `src/`; returns its number of top-level
    circles (0 if only the file level was asked for)."""
    files = {}
    for root, _, names in os.walk(src):
        for name in names:
            if name.endswith(".rs"):
                p = os.path.join(root, name)
                files[module_of_file(src, p)] = p
    modules = set(files)

    def resolve(path):
        """The deepest known module that is a prefix of `path` (a tuple)."""
        for k in range(len(path), 0, -1):
            if path[:k] in modules:
                return path[:k]
        return None

    texts = {}
    for mod, p in files.items():
        texts[mod] = strip_comments_and_strings(open(p, encoding="utf-8").read())
    if not a.tests:
        # A file whose module is declared under `#[cfg(test)]` (`#[cfg(test)] mod tests;`)
        # is test code from its first line, and so is every file below it.
        test_only = set()
        for mod, text in texts.items():
            for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text):
                test_only.add(mod + (m.group(1),))
        for mod in list(texts):
            if any(mod[:len(t)] == t for t in test_only):
                del texts[mod]
                del files[mod]
        modules.intersection_update(files)
        for mod in texts:
            texts[mod] = drop_cfg_test(texts[mod])

    def absolute(mod, path):
        segs = path.split("::")
        if segs[0] == "crate":
            return tuple(segs[1:])
        base = list(mod)
        if segs[0] not in ("super", "self"):
            segs = ["self"] + segs  # a child module's name
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
        return tuple(base + segs)

    # `pub use file::BlobFile;` in vlog/mod.rs: a path `crate::vlog::BlobFile` is an
    # edge to vlog::file, not to the facade (else every parent and child would form
    # a circle through their mod.rs)
    reexports = {}
    for mod, text in texts.items():
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]*);", text):
            for path in expand_use_tree(m.group(1)):
                full = absolute(mod, path)
                if full and full[-1] not in ("self", "*"):
                    reexports.setdefault(mod, {})[full[-1]] = full

    edges = {}  # (from, to) -> example path
    for mod, p in sorted(files.items()):
        text = texts[mod]
        paths = []
        for m in re.finditer(r"\buse\s+((?:crate|super|self)\b[^;]*);", text):
            paths.extend(expand_use_tree(m.group(1)))
        for m in re.finditer(r"(?<![\w:])((?:crate|super)(?:::\w+)+)", text):
            paths.append(m.group(1))
        # a bare path into a child module (`write::commit(..)`, `use write::X`) is
        # an edge too: that is how a `mod.rs` reaches its own files
        children = {c[-1] for c in modules if len(c) == len(mod) + 1 and c[:-1] == mod}
        for m in re.finditer(r"(?<![\w:])(\w+)::", text):
            if m.group(1) in children:
                paths.append("self::" + m.group(1))
        # a file `x.rs` (or `x/mod.rs`) is module `x`; `super` is its parent
        for path in paths:
            target = absolute(mod, path)
            t = resolve(target)
            for _ in range(8):  # follow re-exports (bounded: a re-export may loop)
                if t is None or len(target) <= len(t):
                    break
                via = reexports.get(t, {}).get(target[len(t)])
                if via is None or via == target[:len(t) + 1]:
                    break
                target = via + target[len(t) + 1:]
                t = resolve(target)
            if t is None or t == mod:
                continue
            edges.setdefault((mod, t), path)

    def report(level):
        def key(m):
            return m[:1] if level == "top" else m
        g = {}
        for (f, t), ex in edges.items():
            kf, kt = key(f), key(t)
            if kf == kt or not kf or not kt:
                continue
            g.setdefault(kf, {}).setdefault(kt, (f, t, ex))
        nodes = sorted(set(g) | {t for d in g.values() for t in d})
        sccs = tarjan(nodes, {n: sorted(g.get(n, {})) for n in nodes})
        big = sorted((sorted(c) for c in sccs if len(c) > 1), key=lambda c: (-len(c), c))
        name = lambda m: "::".join(m) or "crate"
        print(f"== {level} level: {len(nodes)} modules, "
              f"{sum(len(d) for d in g.values())} edges, {len(big)} circle(s) ==")
        for c in big:
            print(f"circle of {len(c)}: " + ", ".join(name(m) for m in c))
            members = set(c)
            for f in c:
                for t in sorted(g.get(f, {})):
                    if t in members:
                        src, dst, ex = g[f][t]
                        if level == "top" or a.edges:
                            print(f"    {name(f)} -> {name(t)}  ({name(src)}: {ex})")
        if a.edges:
            print(f"-- all {level}-level edges --")
            for f in nodes:
                for t in sorted(g.get(f, {})):
                    print(f"    {name(f)} -> {name(t)}")
        print()
        return len(big)

    levels = ["top", "file"] if a.level == "both" else [a.level]
    if a.check and "top" not in levels:
        levels.insert(0, "top")  # what the check is about
    found = {}
    for level in levels:
        found[level] = report(level)
    return found.get("top", 0)


def tarjan(nodes, succ):
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in nodes:
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    main()
