#!/usr/bin/env python3
"""compare.py A B: every file under directory A equals the one at the same path under B.

JSON files (also report.json files given directly: compare.py A/report.json B/report.json) are
compared as values without the wall-time fields (WALL: "seconds", and the training loop's "secs" and
"ep_secs") and with the directories A and B masked in strings (paths written into the files);
JSON-lines files line by line as JSON values the same way (metrics.jsonl); safetensors files by
their tensors' header and bytes exactly and their metadata as JSON values the same way (a
checkpoint's train_state holds wall times); every other file byte for byte. Prints each difference
and a summary line; exits 1 when anything differs (scripts/samenumbers/same-numbers.sh, issue 32).
"""
import filecmp
import json
import os
import struct
import sys

WALL = {"seconds", "secs", "ep_secs"}


def norm(o, a, b):
    if isinstance(o, dict):
        return {k: norm(v, a, b) for k, v in o.items() if k not in WALL}
    if isinstance(o, list):
        return [norm(x, a, b) for x in o]
    if isinstance(o, str):
        return o.replace(a, "DIR").replace(b, "DIR")
    return o


def diff(x, y, path=""):
    """Prints and counts the differing leaves of two normalised JSON values."""
    if type(x) is not type(y):
        print("DIFF", path or "/", x, y)
        return 1
    if isinstance(x, dict):
        return sum(diff(x.get(k), y.get(k), f"{path}/{k}") for k in sorted(set(x) | set(y)))
    if isinstance(x, list):
        if len(x) != len(y):
            print("DIFF", path, f"length {len(x)} != {len(y)}")
            return 1
        return sum(diff(u, v, f"{path}[{i}]") for i, (u, v) in enumerate(zip(x, y)))
    if x != y:
        print("DIFF", path or "/", x, y)
        return 1
    return 0


def loads(v):
    """A safetensors metadata value: its JSON value where it is JSON, else the string."""
    try:
        return json.loads(v)
    except ValueError:
        return v


def safetensors(path):
    """The header without metadata, the metadata with JSON values decoded, and the data bytes."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = {k: loads(v) for k, v in header.pop("__metadata__", {}).items()}
    return header, meta, raw[8 + n:]


def same(pa, pb, a, b):
    if pa.endswith(".json") and os.path.getsize(pa) > 0:
        with open(pa) as fa, open(pb) as fb:
            return diff(norm(json.load(fa), a, b), norm(json.load(fb), a, b), pa) == 0
    if pa.endswith(".jsonl"):
        with open(pa) as fa, open(pb) as fb:
            la = [norm(json.loads(x), a, b) for x in fa if x.strip()]
            lb = [norm(json.loads(x), a, b) for x in fb if x.strip()]
        return diff(la, lb, pa) == 0
    if pa.endswith(".safetensors"):
        ha, ma, da = safetensors(pa)
        hb, mb, db = safetensors(pb)
        if ha != hb or da != db:
            print("DIFF", pa, "tensors")
            return False
        return diff(norm(ma, a, b), norm(mb, a, b), pa + ":metadata") == 0
    return filecmp.cmp(pa, pb, shallow=False)


def main():
    a, b = sys.argv[1], sys.argv[2]
    if os.path.isfile(a):
        pairs = [(a, b)]
        a, b = os.path.dirname(os.path.abspath(a)), os.path.dirname(os.path.abspath(b))
    else:
        pairs = [(os.path.join(r, f), os.path.join(r, f).replace(a, b, 1)) for r, _, fs in os.walk(a) for f in fs]
    bad = 0
    for pa, pb in sorted(pairs):
        if not os.path.exists(pb):
            print("MISSING", pb)
            bad += 1
        elif not same(pa, pb, a, b):
            print("DIFF", pa)
            bad += 1
    print(f"{len(pairs)} files compared, {bad} differ (JSON, JSON lines and safetensors metadata without wall times, directories masked; tensors and other files byte for byte)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
