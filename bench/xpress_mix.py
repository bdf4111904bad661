#!/usr/bin/env python3
"""xpress_mix.py — the item mix of a trace's plain XPRESS buffers (written for round 8; its notes
are in the git history of docs/etl.md):
matches by length form and distance class, literal runs before a match, flag words.

    bench/xpress_mix.py /tmp/net.etl

Slow (a byte-at-a-time decoder, ~15 s for net.4.5.2.x64); for tuning etl_xpress.c only.
"""
import collections
import struct
import sys


def buffers(data):
    off = 0
    while off + 0x48 <= len(data):
        bsize = struct.unpack_from('<I', data, off)[0]
        if bsize < 0x48 or bsize > len(data) - off:
            break
        saved = struct.unpack_from('<I', data, off + 4)[0]
        if data[off + 0x34] & 0x40 and saved > 0x48:
            yield data[off + 0x48:off + bsize], saved - 0x48
        off += bsize


def main():
    data = open(sys.argv[1], 'rb').read()
    kinds, runs = collections.Counter(), collections.Counter()
    nbuf = 0
    for inp, n_out in buffers(data):
        nbuf += 1
        ip, out, half, nfl, run = 0, bytearray(), None, 0, 0
        while len(out) < n_out and ip < len(inp):
            if nfl == 0:
                if ip + 4 > len(inp):
                    break
                flags = struct.unpack_from('<I', inp, ip)[0]
                ip += 4
                nfl = 32
                kinds['flag words'] += 1
            nfl -= 1
            if not (flags >> nfl) & 1:
                out.append(inp[ip])
                ip += 1
                run += 1
                continue
            runs[min(run, 17)] += 1
            run = 0
            tok = inp[ip] | inp[ip + 1] << 8
            ip += 2
            dist, length, kind = (tok >> 3) + 1, tok & 7, '3-bit length'
            if length == 7:
                if half is None:
                    half, nib = ip, inp[ip] & 15
                    ip += 1
                else:
                    nib, half = inp[half] >> 4, None
                length, kind = 7 + nib, 'nibble length'
                if nib == 15:
                    b = inp[ip]
                    ip += 1
                    length, kind = 22 + b, 'length byte'
                    if b == 255:
                        length = inp[ip] | inp[ip + 1] << 8
                        ip += 2
                        kind = '2/4-byte length'
                        if length == 0:
                            length = struct.unpack_from('<I', inp, ip)[0]
                            ip += 4
            length += 3
            dc = '>=32' if dist >= 32 else '16..31' if dist >= 16 else '8..15' if dist >= 8 else str(dist)
            kinds[kind] += 1
            kinds['%s, distance %s' % (kind, dc)] += 1
            for _ in range(length):
                if len(out) >= n_out:
                    break
                out.append(out[len(out) - dist])
    print('%d compressed buffers' % nbuf)
    for k in sorted(kinds):
        print('%9d  %s' % (kinds[k], k))
    tot = sum(runs.values())
    print('literals before a match (17 = more than 16):')
    for k in sorted(runs):
        print('%9d  %5.1f %%  %d' % (runs[k], 100.0 * runs[k] / tot, k))


if __name__ == '__main__':
    main()
