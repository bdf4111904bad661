#!/usr/bin/env python3
"""The decode path's shape (issue 19 items 1 and 4; ctest lint.check_decode_shape).

- no inline assembly anywhere in the project's C sources (etwcore, api, server, bench, tests);
- in the decode path (etwcore/decode, etwcore/backends/etl): no file over 1,500 lines and no
  function over 150 lines, except the one documented op interpreter (dec_plan_run);
- in all of the project's C (the ETL decode path, the Linux fast encoder linux_decode.c, ...), a
  computed goto only through a table of the function's own (`goto *T[i]`), never to a code
  address kept in data (item 1: no jump to a stored address);
- vector intrinsics (`_mm*_`, `__m128`…, `<*intrin.h>`) only in the one module per instruction
  set (today only etwcore/src/simd_sse2.h): every other file calls simd.h's named kernels
  (issue 19 item 1);
- docs/architecture.md's ETL part (the path of a record) a map of at most 20 lines (item 6).

A function's length is counted from the line of its name to the line of its closing brace (as
universal-ctags' line/end fields do). Prints every violation and the longest functions; exits 1
if there is any violation."""
import os
import re
import sys

ROOT = os.environ.get("ETWD_SRC") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DECODE_DIRS = ("etwcore/decode", "etwcore/backends/etl")
MAX_FILE, MAX_FN, MAX_DOC = 1500, 150, 20
EXCEPTIONS = {"dec_plan_run"}  # the op interpreter (dec_plan_run.c's header says why)
ATTR = re.compile(r"__attribute__\s*\(\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\)")
STORED_JUMP = re.compile(r"goto\s*\*\s*(?!\w+\s*\[)")
INTRIN = re.compile(r"\b_mm(256|512)?_\w+|\b__m(128|256|512)\w*|\w*intrin\.h")
SIMD_MODULE = {"etwcore/src/simd_sse2.h"}
ASM = re.compile(r"\b(__asm__|__asm|asm)\s*(volatile|__volatile__|goto|inline)?\s*\(")


def strip(text, keep_pp=False):
    """@text with comments, string and character literals blanked and preprocessor lines (with
    their continuations) emptied; newlines kept, so line numbers stay."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    lines = "".join(out).split("\n")
    if keep_pp:
        return lines
    k = 0
    while k < len(lines):
        if lines[k].lstrip().startswith("#"):
            while lines[k].rstrip().endswith("\\") and k + 1 < len(lines):
                lines[k] = ""
                k += 1
            lines[k] = ""
        k += 1
    return lines


def functions(path):
    """(name, first line, length) of every function defined in @path."""
    lines = strip(open(path, encoding="utf-8", errors="replace").read())
    depth, head, head_line, found = 0, "", None, []
    start = name = None
    for ln, line in enumerate(lines, 1):
        for c in line:
            if depth == 0:
                if c == "{":
                    head = ATTR.sub(lambda a: re.sub(r"[^\n]", " ", a.group(0)), head)
                    m = re.search(r"(\w+)\s*\([^;=]*\)[\w\s()]*$", head)
                    if m and "=" not in head and not re.match(r"\s*(struct|union|enum)\b[^(]*$", head):
                        # the line of the name: count the newlines of the head before it
                        name = m.group(1)
                        start = head_line + head[: m.start(1)].count("\n")
                    else:
                        name = None
                    depth = 1
                    head, head_line = "", None
                    continue
                if c in ";}":
                    head, head_line = "", None
                    continue
                if head_line is None and not c.isspace():
                    head_line = ln
                if head_line is not None:
                    head += c
            else:
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                    if depth == 0 and name:
                        found.append((name, start, ln - start + 1))
                        name = None
        if depth == 0 and head_line is not None:
            head += "\n"
    return found


def c_files(top):
    for d, _, files in os.walk(os.path.join(ROOT, top)):
        for f in files:
            if f.endswith((".c", ".h")):
                yield os.path.join(d, f)


def main():
    problems = []
    for top in ("etwcore", "api", "server", "bench", "tests"):
        for p in c_files(top):
            r = os.path.relpath(p, ROOT)
            for k, line in enumerate(strip(open(p, encoding="utf-8", errors="replace").read(), True), 1):
                if ASM.search(line):
                    problems.append("%s:%d: inline assembly" % (r, k))
                if STORED_JUMP.search(line):
                    problems.append("%s:%d: a jump to a code address kept in data: %s" % (r, k, line.strip()))
                if INTRIN.search(line) and r not in SIMD_MODULE:
                    problems.append("%s:%d: vector intrinsics outside the simd module: %s" % (r, k, line.strip()))
    longest = []
    for top in DECODE_DIRS:
        for p in sorted(c_files(top)):
            r = os.path.relpath(p, ROOT)
            n = sum(1 for _ in open(p, encoding="utf-8", errors="replace"))
            if n > MAX_FILE:
                problems.append("%s: %d lines (at most %d)" % (r, n, MAX_FILE))
            for name, ln, length in functions(p):
                longest.append((length, r, ln, name))
                if length > MAX_FN and name not in EXCEPTIONS:
                    problems.append("%s:%d: %s is %d lines (at most %d)" % (r, ln, name, length, MAX_FN))
    arch = open(os.path.join(ROOT, "docs/architecture.md"), encoding="utf-8").read()
    m = re.search(r"^### ETL replay.*?(?=^#)", arch, re.M | re.S)
    n = len([l for l in m.group(0).splitlines() if l.strip()]) if m else 0
    if not m or n > MAX_DOC:
        problems.append("docs/architecture.md: the ETL section is %d lines (at most %d)" % (n, MAX_DOC))
    longest.sort(reverse=True)
    print("decode path: %d functions; longest: %s" % (len(longest), ", ".join(
        "%s %d" % (name, length) for length, _, _, name in longest[:5])))
    for p in problems:
        print(p)
    print("%d problem(s)" % len(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
