"""The built-in table of well-known provider GUIDs (issue 24, etwcore/decode/dec_known.c): without
any manifest, `etwd convert` names the providers the table knows — the krabsetw PowerShell trace's
112 events are Microsoft-Windows-PowerShell (still undecoded: a name is not a schema), the CLR
traces' DotNETRuntime/Rundown/Private events are named too — and the fast and reference decoders
write the same bytes. Precedence: a manifest that names the same GUID otherwise wins over the
table. The table agrees with every manifest of the test data that defines one of its GUIDs."""
import glob
import json
import os
import re
import subprocess
import tempfile

from etwd_harness import check, done, BIN, CORPUS, MANIFESTS, SRC

PS_GUID = "{a0c1853b-5c40-4b15-8766-3cf1c58f985a}"
FILES = {  # corpus file -> {GUID: name the table gives} for events no manifest or metadata names
    "microsoft+krabsetw/examples/NativeExamples/powershell.etl": {PS_GUID: "Microsoft-Windows-PowerShell"},
    "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/smallEtlFile.etl":
        {"{a669021c-c450-4609-a035-5af59af4df18}": "Microsoft-Windows-DotNETRuntimeRundown"},
    "microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/gcevents.etl.zip":
        {"{e13c0d23-ccbc-4e12-931b-d9cc2eee27e4}": "Microsoft-Windows-DotNETRuntime"},
}


def convert(path, *extra):
    r = subprocess.run([BIN, "convert", path, "--quiet"] + list(extra), capture_output=True, timeout=600)
    check(r.returncode == 0, "convert %s %s: rc %d %s" % (path, extra, r.returncode, r.stderr[-500:]))
    return r.stdout


def events(out):
    return [json.loads(l) for l in out.splitlines() if l.strip()]


def table():
    src = open(os.path.join(SRC, "etwcore/decode/dec_known.c")).read()
    return dict(re.findall(r'\{"(\{[0-9a-f-]{36}\})", "([^"]+)"\}', src))


def main():
    known = table()
    check(len(known) >= 40, "the table has only %d entries" % len(known))
    for rel, want in FILES.items():
        path = os.path.join(CORPUS, rel)
        fast = convert(path)
        ref = convert(path, "--decode", "reference")
        check(fast == ref, "%s: fast and reference decoders differ without manifests" % rel)
        evs = events(fast)
        for guid, name in want.items():
            mine = [e for e in evs if e.get("System", {}).get("Provider", {}).get("Guid") == guid]
            check(mine and all(e["System"]["Provider"]["Name"] == name for e in mine),
                  "%s: %d events of %s, names %r (want %s)" % (rel, len(mine), guid,
                  sorted({e["System"]["Provider"]["Name"] for e in mine}), name))
            check(known.get(guid) == name, "%s is not %s in the table" % (guid, name))
        bare = sorted({e["System"]["Provider"]["Name"] for e in evs if "System" in e
                       and e["System"]["Provider"]["Name"].startswith("{")
                       and e["System"]["Provider"]["Name"] in known})
        check(not bare, "%s: GUIDs of the table left bare: %r" % (rel, bare))
    ps = events(convert(os.path.join(CORPUS, list(FILES)[0])))
    ps = [e for e in ps if e.get("System", {}).get("Provider", {}).get("Guid") == PS_GUID]
    check(len(ps) == 112 and all("Undecoded" in e for e in ps), "PowerShell without manifests: %d events" % len(ps))

    # precedence: a manifest naming the GUID otherwise wins over the table (fast and reference)
    d = tempfile.mkdtemp(prefix="etwd-known-")
    with open(os.path.join(d, "ps-renamed.man"), "w") as f:
        f.write('<?xml version="1.0"?>\n<instrumentationManifest xmlns="http://schemas.microsoft.com/win/2004/08/events">'
                '<instrumentation><events><provider name="Etwd-Test-Renamed" guid="%s" symbol="X" '
                'resourceFileName="x.dll" messageFileName="x.dll"><events>'
                '<event value="7937" version="1" level="win:Informational" symbol="E1"/></events></provider>'
                '</events></instrumentation></instrumentationManifest>\n' % PS_GUID)
    path = os.path.join(CORPUS, list(FILES)[0])
    fast = convert(path, "--manifests", d)
    check(fast == convert(path, "--manifests", d, "--decode", "reference"), "with a manifest: fast and reference differ")
    ps = [e for e in events(fast) if e.get("System", {}).get("Provider", {}).get("Guid") == PS_GUID]
    check(len(ps) == 112 and all(e["System"]["Provider"]["Name"] == "Etwd-Test-Renamed" for e in ps),
          "a manifest's name wins over the table: %r" % sorted({e["System"]["Provider"]["Name"] for e in ps}))

    # the table agrees with the manifests of the test data (PowerShellCore's file stands for
    # Microsoft-Windows-PowerShell too, under its own GUID: no conflict)
    seen = 0
    for f in glob.glob(os.path.join(MANIFESTS, "**/*"), recursive=True):
        if not f.endswith((".man", ".xml")):
            continue
        text = open(f, encoding="utf-8", errors="replace").read()
        for tag in re.findall(r"<provider\b[^>]*>", text, re.S):
            g = re.search(r'\bguid="(\{[^"]+\})"', tag)
            n = re.search(r'\bname="([^"]+)"', tag)
            if g and n and g.group(1).lower() in known:
                seen += 1
                check(known[g.group(1).lower()] == n.group(1),
                      "%s: %s is %s, the table says %s" % (f, g.group(1), n.group(1), known[g.group(1).lower()]))
    check(seen >= 10, "only %d manifest providers checked against the table" % seen)
    done()


if __name__ == "__main__":
    main()
