#!/usr/bin/env python3
"""Layering and error-table checks over the sources (ctest lint.check_layers).

The dependency direction is server/ -> api/ -> etwcore (core -> backends). CMake enforces most
of it (each layer is its own target and sees only the include paths of the layers below), so a
plain `#include "config.h"` in api/ does not compile; this catches what CMake cannot see:
relative includes that climb into another layer, and build files that compile another layer's
sources. Prints every violation and exits 1 if there is any."""
import os
import re
import sys

ROOT = os.environ.get("ETWD_SRC") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
problems = []


def sources(top, exts=(".c", ".h", ".in")):
    for d, _, files in os.walk(os.path.join(ROOT, top)):
        for f in files:
            if f.endswith(exts):
                yield os.path.join(d, f)


def rel(p):
    return os.path.relpath(p, ROOT)


INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
# layer -> directories (of the tree) its sources must never reach
FORBIDDEN = {"api": ("server/",), "etwcore": ("server/", "api/")}

for layer, bad in FORBIDDEN.items():
    for p in sources(layer):
        for m in INCLUDE.finditer(open(p, encoding="utf-8", errors="replace").read()):
            target = os.path.normpath(os.path.join(os.path.dirname(rel(p)), m.group(1))) + "/"
            if m.group(1).startswith("..") and any(target.startswith(b) for b in bad):
                problems.append("%s includes %s (a layer above %s/)" % (rel(p), m.group(1), layer))
# a layer's build file compiles no source of a layer above it
for layer, bad in FORBIDDEN.items():
    cm = os.path.join(ROOT, layer, "CMakeLists.txt")
    text = open(cm, encoding="utf-8").read()
    for b in bad:
        for line in text.splitlines():
            if "${CMAKE_SOURCE_DIR}/" + b in line and not line.lstrip().startswith("#"):
                problems.append("%s uses %s: %s" % (rel(cm), b, line.strip()))


# the flags every own source gets (the Windows force-included header, its include path) come
# from the lowest layer
for line in open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8").read().splitlines():
    if ("-include" in line or "-I" in line) and re.search(r"\$\{CMAKE_SOURCE_DIR\}/(server|api)/", line) \
            and not line.lstrip().startswith("#"):
        problems.append("CMakeLists.txt gives every source a flag from a higher layer: %s" % line.strip())

# server/ and api/ reach the backends' process-wide knobs and counters only through
# etwcore/backend.h (etw_backends_configure, etw_backends_metrics): no backend-specific header,
# no backend setter
KNOB_HEADERS = ("etwcore/linux.h", "etwcore/winreq.h", "etwcore/nats_src.h")
KNOB_CALLS = re.compile(r"\b(etw_linux_set_\w+|etw_etl_set_dirs|etw_decode_set_default)\s*\(")
for p in list(sources("server")) + list(sources("api")):
    text = open(p, encoding="utf-8", errors="replace").read()
    for m in INCLUDE.finditer(text):
        if m.group(1) in KNOB_HEADERS:
            problems.append("%s includes the backend header %s (use etw_backends_configure)" % (rel(p), m.group(1)))
    for m in KNOB_CALLS.finditer(text):
        problems.append("%s calls the backend knob %s (use etw_backends_configure)" % (rel(p), m.group(1)))

# every error goes through the one table (api/problem.h): a problem call names a row
# (ETWD_P_..., etwd_prob_of(e), a variable), never a literal status or type name, and only
# api/http.c writes the type URI
PROBLEM_CALL = re.compile(r"\betwd_problem(_conn)?\s*\(\s*[^,()]+,\s*([0-9\"][^,]*)")
for top in ("api", "server"):
    for p in sources(top, (".c", ".h")):
        text = open(p, encoding="utf-8", errors="replace").read()
        for m in PROBLEM_CALL.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            problems.append("%s:%d: etwd_problem%s with a literal %s instead of a row of api/problem.h"
                            % (rel(p), line, m.group(1) or "", m.group(2).strip()))
        if "urn:etwd:problem:" in text and rel(p) not in ("api/http.c", "api/openapi.c", "api/problem.h"):
            problems.append("%s writes a problem type URI itself (only api/http.c does)" % rel(p))

# one row per type name: a type has one status and one title (core names: etwcore/err.h)
names = re.findall(r'^\s*X\(\w+,\s*"([a-z-]+)"', open(os.path.join(ROOT, "etwcore/include/etwcore/err.h")).read(), re.M)
names += re.findall(r'^\s*X\(\w+,\s*\d+,\s*"([a-z-]+)"', open(os.path.join(ROOT, "api/problem.h")).read(), re.M)
for n in sorted(set(x for x in names if names.count(x) > 1)):
    problems.append("problem type %s has more than one row (etwcore/err.h, api/problem.h)" % n)
if len(names) < 20:
    problems.append("found only %d problem rows in etwcore/err.h and api/problem.h" % len(names))

for p in problems:
    print("check_layers:", p)
print("%d problem(s)" % len(problems))
sys.exit(1 if problems else 0)
