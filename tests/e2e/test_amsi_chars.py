"""The "Raw Script" of AmsiTrace/AmsiScript events (AMSITrace.etl, 19 TraceLogging events) is the
script's text, one JSON string — not an array of one-character strings. The field is a
TraceLoggingWCharArray (InType UInt16 | variable count, OutType String): an array of UTF-16
characters, which every decoder family now renders as one string (dec_char_array).

The expected values are taken from the file's bytes here, independently of etwd: each event's
TraceLogging metadata item (type 11: "AmsiScript", fields Engine, Script — UTF-16z strings — and
"Raw Script", InType 0xC6 = UInt16 | Vcount | OutType follows, OutType 2) is found in the file; its
extended item's header gives where the payload starts (the metadata item is the record's last
extended item), and the payload is read by that layout: two NUL-terminated UTF-16 strings, then a
u16 count and that many UTF-16 units. Checked through `etwd convert` in both decode modes
(byte-identical) and through a server's file decode over TLS."""
import json
import os
import struct
import subprocess
import tempfile
from collections import Counter

from etwd_harness import Etwd, check, done, BIN, CORPUS

AMSI = os.path.join(CORPUS, "airbus-cert+etl-parser/tests/example/AMSITrace.etl")
META = b"AmsiScript\0Engine\0\x01Script\0\x01Raw Script\0\xc6\x02"


def utf16z(d, p):
    e = p
    while d[e:e + 2] != b"\0\0":
        e += 2
    return d[p:e].decode("utf-16le"), e + 2


def expected(d):
    """(Engine, Script, Raw Script) of every AmsiScript event, from the file's bytes."""
    out = []
    at = 0
    while True:
        j = d.find(META, at)
        if j < 0:
            return out
        at = j + 1
        m = j - 3  # the metadata: u16 size, tag byte 0, then the name
        size = struct.unpack_from("<H", d, m)[0]
        check(size == 3 + len(META), "metadata size %d at %d" % (size, m))
        # EVENT_HEADER_EXTENDED_DATA_ITEM as stored: u16 item size (8-aligned, with this header),
        # u16 ExtType, u16 linkage, u16 DataSize
        isize, itype, _, dsize = struct.unpack_from("<HHHH", d, m - 8)
        check(itype == 11 and dsize == size and isize == (8 + size + 7) // 8 * 8,
              "extended item header at %d: %r" % (m - 8, (isize, itype, dsize)))
        p = m - 8 + isize
        engine, p = utf16z(d, p)
        script, p = utf16z(d, p)
        n = struct.unpack_from("<H", d, p)[0]
        units = d[p + 2:p + 2 + 2 * n]
        check(len(units) == 2 * n, "Raw Script count %d fits" % n)
        out.append((engine, script, units.decode("utf-16le").rstrip("\0")))


def raw_scripts(lines):
    got = []
    for line in lines:
        if not line.strip():
            continue
        ev = json.loads(line)
        if ev.get("System", {}).get("EventName") != "AmsiScript":
            continue
        ed = ev["EventData"]
        raw = ed["Raw Script"]
        got.append((ed["Engine"], ed["Script"], raw if isinstance(raw, str) else json.dumps(raw)))
    return got


def main():
    with open(AMSI, "rb") as f:
        d = f.read()
    want = expected(d)
    check(len(want) == 19, "19 AmsiScript events in the file's bytes: %d" % len(want))
    vb = [w for w in want if w[0] == "VBScript" and w[2].startswith("msgbox")]
    check(len(vb) == 1 and vb[0][2] == 'msgbox "Is VBScript Dead?"\r\n',
          "the VBScript msgbox event's Raw Script from the bytes: %r" % vb)

    tmp = tempfile.mkdtemp(prefix="etwd-amsi-")
    outs = {}
    for mode in ("fast", "reference"):
        out = os.path.join(tmp, mode + ".ndjson")
        r = subprocess.run([BIN, "convert", AMSI, "--event", "AmsiScript", "--decode", mode, "--quiet", "-o", out],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, "convert --decode %s: exit %d %s" % (mode, r.returncode, r.stderr[-300:]))
        with open(out, "rb") as f:
            outs[mode] = f.read()
    check(outs["fast"] == outs["reference"] and len(outs["fast"]) > 1000,
          "convert: fast and reference byte-identical (%d / %d bytes)" % (len(outs["fast"]), len(outs["reference"])))
    got = raw_scripts(outs["fast"].decode("utf-8").splitlines())
    check(len(got) == 19, "convert: 19 AmsiScript events: %d" % len(got))
    check(all(not g[2].startswith('["') for g in got),
          "convert: every Raw Script is one string, no array: %r" % [g[2][:40] for g in got][:2])
    check(Counter(got) == Counter(want), "convert: (Engine, Script, Raw Script) as in the bytes; differing: %r" % (
        list((Counter(got) - Counter(want)).elements())[:2]))
    check(any(g[2] == 'msgbox "Is VBScript Dead?"\r\n' for g in got), "convert: the msgbox script")

    # the same through a server: upload, decode over TLS (ndjson)
    with Etwd() as e:
        st, h, j = e.json("POST", "/api/v1/files?name=amsi.etl", body=d, ctype="application/octet-stream")
        check(st == 201, "upload: %d %r" % (st, j))
        st, h, body = e.request("GET", "/api/v1/files/amsi.etl/events?event=AmsiScript", token="reader",
                                headers={"Accept": "application/x-ndjson"})
        check(st == 200, "decode: %d" % st)
        got = raw_scripts(body.decode("utf-8").splitlines())
        check(len(got) == 19 and Counter(got) == Counter(want),
              "serve: %d AmsiScript events, Raw Script as in the bytes" % len(got))
        check(e.stop() == 0, "clean exit")
    done()


if __name__ == "__main__":
    main()
