"""docs_test.py - the front page and the docs stay true: README.md has at
most 300 lines, every relative link in README.md and docs/*.md names a file
that exists (and a heading of it, for a #anchor), and every figure in
README.md (a number with a decimal point, a unit of time or a ratio, or a
%) is one BENCHMARKS.md also gives, since that file is the one written from
a measured run. usage: docs_test.py [--root DIR] [CHECK]: DIR is the tree
to check (default: this one); CHECK runs only the checks whose name starts
with it (lines, links, figures)."""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check  # noqa: E402

MAX_LINES = 300
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
# A number standing alone (not part of a name such as libpython3.11, an
# address or a version: those have a letter, a dot or a digit run beside).
NUMBER = re.compile(r"(?<![\w.\-/:+])(\d+(?:,\d{3})*(?:\.\d+)?)(?![\w.]*\.\d)")
UNIT = re.compile(r"\s?(ms|us|µs|s|x|%)(?![\w])")


def prose(text):
    """The lines outside fenced code blocks, with their numbers (from 1)."""
    fenced = False
    for n, line in enumerate(text.split("\n"), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line


def slug(heading):
    """The anchor GitHub gives a heading."""
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def anchors(path):
    text = open(path, encoding="utf-8").read()
    return {slug(line.lstrip("#")) for _, line in prose(text) if re.match(r"#{1,6} ", line)}


def check_lines(root):
    n = open(os.path.join(root, "README.md"), encoding="utf-8").read().count("\n")
    check("lines: README.md has at most %d lines (%d)" % (MAX_LINES, n), n <= MAX_LINES,
          "%d lines: move the how-to to docs/" % n)


def bad_links(root, doc):
    bad = []
    text = open(doc, encoding="utf-8").read()
    for n, line in prose(text):
        line = re.sub(r"`[^`]*`", "", line)
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto: are not files of the tree
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            if not os.path.exists(dest):
                bad.append("%s:%d: %s: no such file" % (os.path.relpath(doc, root), n, target))
            elif anchor and (os.path.isdir(dest) or anchor not in anchors(dest)):
                bad.append("%s:%d: %s: no such heading" % (os.path.relpath(doc, root), n, target))
    return bad


def check_links(root):
    docs = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    for doc in docs:
        bad = bad_links(root, doc)
        check("links: every relative link of %s resolves" % os.path.relpath(doc, root), not bad,
              "; ".join(bad[:10]) + (" (and %d more)" % (len(bad) - 10) if len(bad) > 10 else ""))


def figures(text):
    """(line, figure) for each figure: a number with a decimal point, or one
    followed by a unit of time, a ratio or a percentage."""
    for n, line in prose(text):
        for m in NUMBER.finditer(line):
            unit = UNIT.match(line, m.end())
            if "." in m.group(1) or unit:
                yield n, m.group(1), unit.group(1) if unit else ""


def in_benchmarks(bench, number, unit):
    pattern = r"(?<![\w.])" + re.escape(number) + r"(?![\d])"
    if unit:
        pattern += r"\s?" + re.escape(unit) + r"(?!\w)"
    else:
        pattern += r"(?![\w.]*\.\d)"
    return re.search(pattern, bench) is not None


def check_figures(root):
    text = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    bench = open(os.path.join(root, "BENCHMARKS.md"), encoding="utf-8").read()
    stray = ["%d: %s%s" % (n, num, (" " + unit) if unit else "")
             for n, num, unit in figures(text) if not in_benchmarks(bench, num, unit)]
    check("figures: every figure of README.md is also in BENCHMARKS.md", not stray,
          "README.md lines " + "; ".join(stray[:15]) + (" (and %d more)" % (len(stray) - 15)
                                                        if len(stray) > 15 else ""))


def main():
    args = sys.argv[1:]
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    if args[:1] == ["--root"]:
        root, args = args[1], args[2:]
    only = args[0] if args else ""
    tests = (("lines", check_lines), ("links", check_links), ("figures", check_figures))
    chosen = __import__("checks").chosen([name for name, _ in tests])  # or FN_CHECK's
    for name, fn in tests:
        if name in chosen and (name.startswith(only) or only.startswith(name)):
            fn(os.path.abspath(root))


if __name__ == "__main__":
    main()
    sys.exit(1 if __import__("checks").failed else 0)
