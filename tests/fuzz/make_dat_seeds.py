#!/usr/bin/env python3
"""Writes the seeds of tests/fuzz/fuzz_dat.c into tests/fuzz/seeds_dat/: small version 6
trace.dat files laid out as trace-cmd.dat.v6(5) says, with empty format sections (the check
skips them by their sizes) and 4 KiB pages of ring-buffer events:

  whole      2 CPUs, each one whole page
  cut-page   CPU 1's data cut inside its second page (some whole events before the cut)
  cut-table  the file ends inside the CPU table
  options    an options section (one option) before the flyrecord table, both CPUs cut

Run once when the layout changes; the seeds are committed. (libFuzzer mutates from here: a
fuzzer would take long to find the magic and the section names by itself.)"""
import os
import struct
import sys

PAGE = 4096


def page(n_events, ts=1000):
    """A ring-buffer page: timestamp, commit (8 bytes: long size 8), then n_events events of
    type_len 2 (4-byte header + 8 bytes of payload)."""
    body = b"".join(struct.pack("<I", (i << 5) | 2) + struct.pack("<Q", i) for i in range(n_events))
    return (struct.pack("<QQ", ts, len(body)) + body).ljust(PAGE, b"\0")


def header(ncpu, options=b""):
    h = b"\x17\x08\x44tracing" + b"6\0" + bytes([0, 8]) + struct.pack("<I", PAGE)
    h += b"header_page\0" + struct.pack("<Q", 4) + b"hdrp"
    h += b"header_event\0" + struct.pack("<Q", 4) + b"hdre"
    h += struct.pack("<I", 1) + struct.pack("<Q", 3) + b"fmt"  # ftrace formats
    h += struct.pack("<I", 1) + b"sched\0" + struct.pack("<I", 1) + struct.pack("<Q", 2) + b"fm"
    h += struct.pack("<I", 0) + struct.pack("<I", 0) + struct.pack("<Q", 0)  # kallsyms, printk, cmdlines
    h += struct.pack("<I", ncpu)
    if options:
        h += b"options  \0" + options + struct.pack("<H", 0)
    return h + b"flyrecord\0"


def dat(pages_per_cpu, options=b""):
    """The file for CPU i holding pages_per_cpu[i] (lists of event counts), data page-aligned."""
    h = header(len(pages_per_cpu), options)
    data_start = (len(h) + 16 * len(pages_per_cpu) + PAGE - 1) // PAGE * PAGE
    table, data, off = b"", b"", data_start
    for pages in pages_per_cpu:
        d = b"".join(page(n, 1000 + 10 * i) for i, n in enumerate(pages))
        table += struct.pack("<QQ", off, len(d))
        data += d
        off += len(d)
    return (h + table).ljust(data_start, b"\0") + data


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds_dat")
    os.makedirs(out, exist_ok=True)
    whole = dat([[3], [5]])
    two = dat([[3], [4, 6]])
    seeds = {
        "whole": whole,
        "cut-page": two[: len(two) - PAGE + 16 + 3 * 12 + 5],
        "cut-table": whole[: len(header(2)) + 20],
        "options": dat([[2, 7], [1]], struct.pack("<HI", 8, 4) + b"opt!")[: -PAGE - PAGE // 2],
    }
    for name, b in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(b)
    print(f"{len(seeds)} seeds in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
