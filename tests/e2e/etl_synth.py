"""Hand-built Windows .etl files for the e2e tests. First, kernel traces (test_chrome_cpu.py,
test_chrome_flows.py; the corpus has no CSwitch/ReadyThread): SYSTEM64 records in 4 KiB buffers,
one CPU a buffer, a QPC of 10 MHz (a tick is 100 ns); their timestamps are ticks after T0. Then
the pieces of files whose buffers are just large enough for their records (below)."""
import struct

START_FT = 132754283728578510  # the trace's start (FILETIME) at T0
T0 = 1000000


def buffer(cpu, seq, recs, first=False):
    """A 4 KiB buffer of CPU `cpu` holding records `recs` (the first buffer of the file: `first`)."""
    size = 4096
    body = b"".join(recs)
    used = 0x48 + len(body)
    h = bytearray(b"\0" * 0x48)
    struct.pack_into("<II", h, 0, size, used)
    struct.pack_into("<Q", h, 0x18, seq)
    struct.pack_into("<H", h, 0x28, cpu)
    struct.pack_into("<IIH", h, 0x2C, 0, used, 0x21 if first else 0x20)
    return bytes(h) + body + b"\xff" * (size - used)


def record(hook, version, ts, payload, tid=0, pid=0):
    """A SYSTEM64 record of hook `hook` at T0 + ts, padded to 8 bytes."""
    r = struct.pack("<HBBHHIIQII", version, 2, 0xC0, 0x20 + len(payload), hook, tid, pid, T0 + ts, 0, 0) + payload
    return r + b"\0" * (-len(r) % 8)


def logfile_header(nbuf):
    h = bytearray(0x118 + 4)
    struct.pack_into("<I", h, 0, 65536)
    struct.pack_into("<I", h, 0x24, nbuf)
    struct.pack_into("<I", h, 0x2C, 8)
    struct.pack_into("<QQI", h, 0x48 + 176 + 8, 10000000, START_FT, 1)  # QPC at 10 MHz
    return record(0, 2, 0, bytes(h), 11, 22)


def process(ts, pid, name):  # Process/DCStart v3
    return record(0x0303, 3, ts, struct.pack("<QIIIiQI", 0, pid, 4, 1, 0, 0, 0) + name + b"\0" + b"\0\0", 0, pid)


def thread(ts, pid, tid):  # Thread/DCStart v3
    return record(0x0503, 3, ts, struct.pack("<II7QIBBBB", pid, tid, *([0] * 7), 0, 8, 5, 0, 0) + b"\0\0", 0, 0)


def cswitch(ts, new, old, pid):  # Thread/CSwitch v2, on the buffer's CPU
    return record(0x0524, 2, ts, struct.pack("<IIbbBbbbbbII", new, old, 8, 8, 0, 0, 6, 1, 5, 0, 0, 0), new, pid)


def ready(ts, woken, waker, pid):  # Thread/ReadyThread v2 (TThreadId, AdjustReason, AdjustIncrement, Flag)
    return record(0x0532, 2, ts, struct.pack("<Ibbbb", woken, 0, 1, 0, 0), waker, pid)


# ---- files of one header buffer and buffers just large enough for their records
# (test_etl_merge.py, test_tdh_chars.py, test_process_filter.py)

def header_record(t0, boot_ft, start_ft, freq=10**7):
    """The SYSTEM64 logfile header record at QPC `t0` (TRACE_LOGFILE_HEADER, 64-bit pointers, two
    empty names; the clock is a QPC of `freq` Hz)."""
    lh = bytearray(0x20 + 0x118 + 4)
    struct.pack_into("<HBBHHIIQ", lh, 0, 2, 2, 0xC0, len(lh), 0, 11, 22, t0)
    struct.pack_into("<IIII", lh, 0x20, 65536, 0x0501000A, 19041, 1)
    struct.pack_into("<I", lh, 0x20 + 0x2C, 8)
    struct.pack_into("<QQQI", lh, 0x20 + 0x48 + 176, boot_ft, freq, start_ft, 1)
    return bytes(lh)


def packed_buffer(payload, seq):
    """Buffer `seq` (0: the header buffer) holding `payload`, its size rounded up to 8 bytes."""
    size = 0x48 + len(payload)
    size += -size % 8
    hdr = bytearray(0x48)
    struct.pack_into("<II", hdr, 0, size, 0x48 + len(payload))
    struct.pack_into("<Q", hdr, 0x18, seq)
    struct.pack_into("<IHH", hdr, 0x30, 0x48 + len(payload), 0x21, 0 if seq else 4)
    return bytes(hdr) + payload + b"\xff" * (size - 0x48 - len(payload))


def classic_record(ts, guid, opcode, payload):
    """A FULL64 classic record of provider `guid` (16 bytes), padded to 8 bytes."""
    rec = bytearray(0x30)
    struct.pack_into("<HBBBBHIIQ", rec, 0, 0x30 + len(payload), 0x14, 0xC0, opcode, 0, 0, 4, 4, ts)
    rec[0x18:0x28] = guid
    rec += payload
    return bytes(rec + b"\0" * (-len(rec) % 8))
