"""POST /api/v1/manifests (issue 24): a default server (empty manifest directory) decodes the
krabsetw PowerShell trace with 112 events undecoded (named by the built-in table of well-known
provider GUIDs only); after the PowerShell
manifest is uploaded (admin), a file decode and a replay of the same trace name the provider
(Microsoft-Windows-PowerShell) and its events, none undecoded; GET /api/v1/manifests lists it.
Bad uploads are clear 4xx and store nothing: a body that is not a manifest (422), a bad name
(400), a reader (403), an existing name (409), more than 16 MiB (413)."""
import os

from etwd_harness import Etwd, check, done, CORPUS, MANIFESTS

PS_ETL = os.path.join(CORPUS, "microsoft+krabsetw/examples/NativeExamples/powershell.etl")
PS_MAN = os.path.join(MANIFESTS, "PowerShell+PowerShell/src/PowerShell.Core.Instrumentation/PowerShell.Core.Instrumentation.man")
PS_GUID = "{a0c1853b-5c40-4b15-8766-3cf1c58f985a}"
OCT = "application/octet-stream"


def ps_events(recs):
    return [r for r in recs if "System" in r and r["System"]["Provider"]["Guid"] == PS_GUID]


def replay(e):
    st, _, j = e.json("POST", "/api/v1/sessions", body={"files": ["ps.etl"], "replay": "fast"})
    check(st == 201, "replay: %d %r" % (st, j))
    return [r for r in e.ndjson("/api/v1/sessions/%d/events" % j["id"], timeout=120) if "System" in r]


def main():
    with Etwd() as e:
        e.json("POST", "/api/v1/files?name=ps.etl", body=open(PS_ETL, "rb").read(), ctype=OCT, expect=201)
        before = ps_events(e.ndjson("/api/v1/files/ps.etl/events"))
        check(len(before) == 112 and all("Undecoded" in r for r in before)
              and all(r["System"]["Provider"]["Name"] == "Microsoft-Windows-PowerShell" for r in before),
              "without the manifest: 112 undecoded PowerShell events, got %d" % len(before))
        st, _, j = e.json("GET", "/api/v1/manifests", token="reader")
        check(st == 200 and j == [], "no manifests at first: %d %r" % (st, j))

        man = open(PS_MAN, "rb").read()
        name = "PowerShell.Core.Instrumentation.man"
        # refusals first: nothing may be stored by any of them
        st, _, j = e.json("POST", "/api/v1/manifests?name=" + name, body=man, ctype=OCT, token="reader")
        check(st == 403, "reader upload: %d" % st)
        st, _, j = e.json("POST", "/api/v1/manifests?name=" + name, body=b"<html>not a manifest</html>", ctype=OCT)
        check(st == 422 and j.get("type", "").endswith("invalid-manifest"), "junk: %d %r" % (st, j))
        st, _, j = e.json("POST", "/api/v1/manifests?name=" + name, body=man[:100], ctype=OCT)
        check(st == 422, "a manifest cut before its first provider: %d %r" % (st, j))
        for bad in ("../x.man", "x.txt", ".hidden.man", "a/b.xml"):
            st, _, j = e.json("POST", "/api/v1/manifests?name=" + bad, body=man, ctype=OCT)
            check(st == 400 and j.get("field") == "name", "name %r: %d %r" % (bad, st, j))
        st, _, j = e.json("POST", "/api/v1/manifests?name=big.man", body=b" " * (16 * 1024 * 1024 + 1), ctype=OCT)
        check(st == 413, "over 16 MiB: %d %r" % (st, j))
        st, _, j = e.json("GET", "/api/v1/manifests", token="reader")
        check(st == 200 and j == [], "refused uploads stored nothing: %r" % j)

        st, _, j = e.json("POST", "/api/v1/manifests?name=" + name, body=man, ctype=OCT)
        check(st == 201 and j == {"name": name, "size": len(man)}, "upload: %d %r" % (st, j))
        st, _, j = e.json("POST", "/api/v1/manifests?name=" + name, body=man, ctype=OCT)
        check(st == 409, "same name again: %d %r" % (st, j))
        st, _, j = e.json("POST", "/api/v1/manifests?name=%s&overwrite=true" % name, body=man, ctype=OCT)
        check(st == 201, "overwrite=true: %d %r" % (st, j))
        st, _, j = e.json("GET", "/api/v1/manifests", token="reader")
        check(j == [{"name": name, "size": len(man)}], "listed: %r" % j)
        left = [f for f in os.listdir(os.path.join(e.state, "manifests")) if f.startswith(".")]
        check(left == [], "temporary files left: %r" % left)

        for how, recs in (("file decode", ps_events(e.ndjson("/api/v1/files/ps.etl/events"))),
                          ("replay", ps_events(replay(e)))):
            check(len(recs) == 112, "%s: %d PowerShell events" % (how, len(recs)))
            check(not any("Undecoded" in r for r in recs), "%s: undecoded events remain" % how)
            check(all(r["System"]["Provider"]["Name"] == "Microsoft-Windows-PowerShell" for r in recs),
                  "%s: provider not named: %r" % (how, recs[0]["System"]["Provider"] if recs else None))
            check(sum(1 for r in recs if r["System"].get("EventName") == "E_A_COMMAND_LIFECYCLE") > 0,
                  "%s: no event decoded by name" % how)
    done()


if __name__ == "__main__":
    main()
