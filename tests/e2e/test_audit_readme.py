"""README.md (issue 24 audit): "every command in the README copy-paste runnable" on a fresh Debian 12
machine as root, which has no sudo — so no command anywhere in the README (fenced blocks, indented
blocks, inline code) starts with or contains `sudo` (test_readme.py checks only the marked blocks
it runs)."""
import os
import re

from etwd_harness import check, done, SRC


def code_texts(text):
    """(line number, code) of fenced blocks, 4-space indented blocks and `inline` spans"""
    out, fenced = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            out.append((n, line))
        else:
            out.extend((n, m) for m in re.findall(r"`([^`]+)`", line))
    return out


def main():
    with open(os.path.join(SRC, "README.md")) as f:
        codes = code_texts(f.read())
    check(len(codes) > 100, "found only %d code texts in README.md" % len(codes))
    bad = [(n, c) for n, c in codes if re.search(r"\bsudo\b", c)]
    check(not bad, "README.md commands with sudo (a root Debian 12 has none): %r" % bad)
    done()


if __name__ == "__main__":
    main()
