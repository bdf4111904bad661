"""Character arrays whose length is another field's value (or a constant length) render as one
string, through the real binary: an .etl file is built here byte for byte — a header buffer and a
buffer holding a KernelTraceControl MetaData/EventInfo record (a TDH TRACE_EVENT_INFO blob laid
out as tdh.h documents it: 112-byte header, 24-byte EVENT_PROPERTY_INFO entries, UTF-16z names),
as relogged traces carry the schemas of their events, followed by events of that schema and of a
manifest written to a temp dir. No corpus trace or shipped manifest has such a field (the corpus's
85 EventInfo blobs and every manifest in ../shared/manifests were searched), so the file is made.

Schema "Counted" (id 7): UnicodeChar/AnsiChar/UInt8/UInt16 + OutType String with a count from a
property (PropertyParamCount) or a fixed count; it decoded as one string before too.
Schema "Lengths" (id 8): the same types with PropertyParamLength (another property holds the
number of characters) and PropertyParamFixedLength; before the fix each rendered its first
character only and the fields after it were read from the wrong bytes.
Manifest event 0x31: win:UInt16 / win:UInt8 with outType xs:string and length="L" / length="3".

Checked: `etwd convert` (--decode fast and reference, byte-identical) gives each event's fields as
the bytes written here say; a server's file decode of the same file (TLS) gives the TDH events'.
"""
import json
import os
import struct
import subprocess
import tempfile
import uuid

from etl_synth import classic_record, header_record, packed_buffer
from etwd_harness import Etwd, check, done, BIN

KTC_METADATA = uuid.UUID("bbccf6c1-6cd1-48c4-80ff-839482e37671").bytes_le
PROV = uuid.UUID("5e1f0c3a-7d2b-4c6e-9a8f-1b2c3d4e5f60")
MPROV = uuid.UUID("5e1f0c3a-7d2b-4c6e-9a8f-1b2c3d4e5f61")

# tdh.h
P_LENGTH, P_COUNT, P_FIXED_LENGTH, P_FIXED_COUNT = 0x2, 0x4, 0x10, 0x20
UINT8, UINT16, UINT32, UNICODECHAR, ANSICHAR = 4, 6, 8, 306, 307
OUT_NULL, OUT_STRING, OUT_USHORT, OUT_UINT = 0, 1, 6, 8


def w16(s):
    return s.encode("utf-16le")


def tei(guid, pname, task, eid, props):
    """TRACE_EVENT_INFO of event @eid (version 1, level 4): props = [(name, flags, in, out, count,
    length)], all top-level; the strings after the property array."""
    n = len(props)
    head = bytearray(112 + 24 * n)
    head[0:16] = guid
    struct.pack_into("<HBBBBHQ", head, 32, eid, 1, 0, 4, 0, 0, 0)
    struct.pack_into("<II", head, 100, n, n)  # PropertyCount, TopLevelPropertyCount
    tail = bytearray()

    def string(s):
        off = len(head) + len(tail)
        tail.extend(w16(s) + b"\0\0")
        return off

    struct.pack_into("<I", head, 52, string(pname))  # ProviderNameOffset
    struct.pack_into("<I", head, 68, string(task))  # TaskNameOffset
    for i, (name, flags, tin, tout, count, length) in enumerate(props):
        struct.pack_into("<IIHHIHHI", head, 112 + 24 * i, flags, string(name), tin, tout, 0, count, length, 0)
    return bytes(head + tail)


COUNTED = [("N", 0, UINT16, OUT_USHORT, 1, 2),
           ("W", P_COUNT, UNICODECHAR, OUT_STRING, 0, 0),
           ("F", P_FIXED_COUNT, ANSICHAR, OUT_STRING, 6, 0),
           ("U16", P_COUNT, UINT16, OUT_STRING, 0, 0),
           ("Nums", P_COUNT, UINT16, OUT_NULL, 0, 2),
           ("T", 0, UINT32, OUT_UINT, 1, 4)]
LENGTHS = [("L", 0, UINT32, OUT_UINT, 1, 4),
           ("WL", P_LENGTH, UNICODECHAR, OUT_STRING, 1, 0),
           ("AL", P_LENGTH, ANSICHAR, OUT_STRING, 1, 0),
           ("UL", P_LENGTH, UINT16, OUT_STRING, 1, 0),
           ("BL", P_LENGTH, UINT8, OUT_STRING, 1, 0),
           ("WF", P_FIXED_LENGTH, UNICODECHAR, OUT_STRING, 1, 5),
           ("T", 0, UINT32, OUT_UINT, 1, 4)]

MANIFEST = """<instrumentationManifest><instrumentation><events>
<provider name='Test-E2E-CharLengths' guid='{%s}' symbol='PL'>
<templates><template tid='TL'>
<data name='L' inType='win:UInt32'/>
<data name='W' inType='win:UInt16' outType='xs:string' length='L'/>
<data name='A' inType='win:UInt8' outType='xs:string' length='L'/>
<data name='K' inType='win:UInt16' outType='xs:string' length='3'/>
<data name='T' inType='win:UInt32'/>
</template></templates>
<events><event value='0x31' template='TL'/></events>
</provider></events></instrumentation></instrumentationManifest>
""" % MPROV


def payloads():
    """[(provider, id, version, payload, expected EventData)]: the texts written as characters."""
    out = []
    w = "a\"\0z"  # a NUL inside stays; the two NULs of padding after it go
    u = "\U0001F600q"
    p = struct.pack("<H", 6) + w16(w + "\0\0") + b"ok\0\0\0\0" + w16(u + "\0\0\0") + \
        struct.pack("<6H", *range(1, 7)) + struct.pack("<I", 9)
    out.append((PROV, 7, 1, p, {"N": 6, "W": w, "F": "ok", "U16": u, "Nums": [1, 2, 3, 4, 5, 6], "T": 9}))
    p = struct.pack("<I", 3) + w16("hi\0") + b"x\0y" + w16("Tom") + b"abc" + w16("fixed") + struct.pack("<I", 77)
    out.append((PROV, 8, 1, p, {"L": 3, "WL": "hi", "AL": "x\0y", "UL": "Tom", "BL": "abc", "WF": "fixed", "T": 77}))
    p = struct.pack("<I", 4) + w16("ab\0\0") + b"cdef" + w16("x\"y") + struct.pack("<I", 5)
    out.append((MPROV, 0x31, 0, p, {"L": 4, "W": "ab", "A": "cdef", "K": "x\"y", "T": 5}))
    return out


def write_etl(path, records, t0=1000):
    """An uncompressed 64-bit ETL file: the header buffer (SYSTEM64 logfile header record, QPC at
    10 MHz) and one buffer of records: ("classic", ts, guid, opcode, payload) as FULL64 headers,
    ("event", ts, guid, id, version, payload) as 64-bit EVENT_HEADERs."""
    start_ft = 133000000000000000
    body = bytearray()
    for r in records:
        if r[0] == "classic":
            body += classic_record(*r[1:])
            continue
        _, ts, guid, eid, version, payload = r
        rec = bytearray(0x50)  # Flags 0x40: 64-bit header
        struct.pack_into("<HBBHHIIQ", rec, 0, 0x50 + len(payload), 0x13, 0xC0, 0x40, 0, 44, 33, ts)
        rec[0x18:0x28] = guid
        struct.pack_into("<HBBBBHQ", rec, 0x28, eid, version, 0, 4, 0, 0, 0)
        rec += payload
        rec += b"\0" * (-len(rec) % 8)
        body += rec
    with open(path, "wb") as f:
        f.write(packed_buffer(header_record(t0, start_ft - 3600 * 10**7, start_ft), 0) + packed_buffer(bytes(body), 1))


def fields(lines):
    """{(provider guid, id): EventData} of the test's events; one that is undecoded or has bytes
    left (Undecoded / Unparsed) as that whole event."""
    got = {}
    for line in lines:
        ev = json.loads(line)
        s = ev["System"]
        g = s["Provider"].get("Guid", "").strip("{}")
        if g in (str(PROV), str(MPROV)):
            got[(g, s["EventID"])] = ev if "Undecoded" in ev or "Unparsed" in ev else ev.get("EventData")
    return got


def main():
    tmp = tempfile.mkdtemp(prefix="etwd-tdhchars-")
    path = os.path.join(tmp, "chars.etl")
    mdir = os.path.join(tmp, "manifests")
    os.mkdir(mdir)
    with open(os.path.join(mdir, "charlengths.man"), "w") as f:
        f.write(MANIFEST)
    recs = [("classic", 1100, KTC_METADATA, 32, tei(PROV.bytes_le, "Test-E2E-TdhChars", "Counted", 7, COUNTED)),
            ("classic", 1200, KTC_METADATA, 32, tei(PROV.bytes_le, "Test-E2E-TdhChars", "Lengths", 8, LENGTHS))]
    evs = payloads()
    for i, (g, eid, ver, p, _) in enumerate(evs):
        recs.append(("event", 1300 + 100 * i, g.bytes_le, eid, ver, p))
    write_etl(path, recs)
    want = {(str(g), eid): exp for g, eid, _, _, exp in evs}

    outs = {}
    for mode in ("fast", "reference"):
        r = subprocess.run([BIN, "convert", path, "--manifests", mdir, "--decode", mode, "--quiet"],
                           capture_output=True, timeout=120)
        check(r.returncode == 0, "convert --decode %s: exit %d %s" % (mode, r.returncode, r.stderr[-300:]))
        outs[mode] = r.stdout
    check(outs["fast"] == outs["reference"], "convert: fast and reference byte-identical")
    got = fields(outs["fast"].decode("utf-8").splitlines())
    for k, exp in want.items():
        check(got.get(k) == exp, "convert: event %s EventData %r, want %r" % (k, got.get(k), exp))

    # a server's file decode of the same file: the TDH events (the manifest is not the server's)
    with open(path, "rb") as f:
        data = f.read()
    with Etwd() as e:
        st, h, j = e.json("POST", "/api/v1/files?name=chars.etl", body=data, ctype="application/octet-stream")
        check(st == 201, "upload: %d %r" % (st, j))
        st, h, body = e.request("GET", "/api/v1/files/chars.etl/events", token="reader",
                                headers={"Accept": "application/x-ndjson"})
        check(st == 200, "decode: %d" % st)
        got = fields(body.decode("utf-8").splitlines())
        for k in ((str(PROV), 7), (str(PROV), 8)):
            check(got.get(k) == want[k], "serve: event %s EventData %r, want %r" % (k, got.get(k), want[k]))
        check(e.stop() == 0, "clean exit")
    done()


if __name__ == "__main__":
    main()
