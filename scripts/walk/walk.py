#!/usr/bin/env python3
"""walk.py MODDIR CALLGRAPH.tsv ROOT...: the files and packages a reader opens on a walk (issue 39's measure).

CALLGRAPH.tsv is the output of (run in the tree measured, MODDIR)
  go run golang.org/x/tools/cmd/callgraph@v0.52.0 -algo=cha \
     -format='{{.Caller}}\t{{.Callee}}\t{{.Filename}}\t{{.Description}}' ./cmd/nvdp
A ROOT is a function as the tool names it. The walk follows the static calls (functions, methods,
closures) from the roots through the module's functions, and the dynamic method calls whose method
belongs to an interface the module declares (task.Task, the ledger, the releaser: what a reader
follows to the implementations), not those of the standard library's interfaces (Write, String...)
nor calls through function values (callbacks, progress). A file counts when a reached function
makes a call in it.
Two counts: every module file reached, and the files outside the layers the issue keeps as they are
(the engine, the models, the data and format packages, internal helpers), which is what a reader
of the walk's logic opens.
"""
import collections, re, sys

MOD = "github.com/nvdp-project/nvdp/"
KEEP = ("nn", "dnn", "cuda", "encoder", "nvib", "wav2vec2", "audio", "lid", "glue", "tokenize",
        "safetensors", "noise", "internal", "jsonfloat", "option", "progress")

def pkg_of(fn):
    m = re.search(re.escape(MOD) + r"([A-Za-z0-9_/]+?)[.)]", fn)
    return m.group(1) if m else None

COMMON = {"String", "Error", "Write", "Read", "Close", "Len", "Less", "Swap", "Unwrap", "ServeHTTP",
          "MarshalJSON", "UnmarshalJSON", "Seek", "ReadAt", "WriteTo", "Format", "Is", "As"}

def module_methods(moddir):
    import os
    out = set()
    for dp, dn, fn in os.walk(moddir):
        dn[:] = [d for d in dn if not d.startswith(".") and d != "testdata"]
        for f in fn:
            if not f.endswith(".go") or f.endswith("_test.go"):
                continue
            src = open(os.path.join(dp, f), encoding="utf-8", errors="replace").read()
            for m in re.finditer(r"type\s+\w+\s+interface\s*\{(.*?)\n\}", src, re.S):
                out |= set(re.findall(r"^\s*([A-Z]\w*)\(", m.group(1), re.M))
    return out - COMMON

def main():
    moddir, tsv, roots = sys.argv[1], sys.argv[2], sys.argv[3:]
    methods = module_methods(moddir)
    edges = collections.defaultdict(set)
    sites = collections.defaultdict(set)
    names = set()
    for line in open(tsv):
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 4:
            continue
        a, b, f, d = parts
        if "dynamic function" in d or "concurrent dynamic" in d:
            continue
        if "dynamic method" in d and re.sub(r"\$\d+$", "", b).rsplit(".", 1)[-1] not in methods:
            continue
        edges[a].add(b)
        sites[a].add(f)
        names.add(a)
    start = set()
    for r in roots:
        if r in names:
            start.add(r)
        else:
            sys.exit("walk: no function " + r)
    seen, todo = set(start), list(start)
    while todo:
        n = todo.pop()
        for m in edges[n]:
            if m not in seen and pkg_of(m):
                seen.add(m)
                todo.append(m)
    files = set()
    for n in seen:
        if pkg_of(n):
            for f in sites[n]:
                if "/" + "nvdp" in f or True:
                    files.add(f)
    files = {f for f in files if f.endswith(".go") and "/go/pkg/mod/" not in f and "/src/" not in f.split("nvdp")[0][-5:]}
    def pkg_file(f):
        m = re.search(r"/((?:[a-z0-9_]+/)*)[^/]+\.go$", f)
        return f
    rel = sorted({re.sub(r"^.*?/(?=(cmd|serve|train|speech|task|model|privacy|audit|report|sweep|release|attack|mlm|nn|dnn|cuda|encoder|nvib|wav2vec2|audio|lid|glue|tokenize|safetensors|noise|internal|jsonfloat|option|progress|api|ledger)/)", "", f) for f in files})
    rel = [f for f in rel if not f.startswith("/")]
    pk = sorted({f.rsplit("/", 1)[0] for f in rel})
    logic = [f for f in rel if f.split("/")[0] not in KEEP]
    lpk = sorted({f.rsplit("/", 1)[0] for f in logic})
    print(f"all: {len(rel)} files in {len(pk)} packages")
    print(f"logic (outside {', '.join(KEEP)}): {len(logic)} files in {len(lpk)} packages: {' '.join(lpk)}")
    for f in logic:
        print("  " + f)

main()
