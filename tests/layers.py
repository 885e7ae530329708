#!/usr/bin/env python3
"""The module rules of docs/ARCHITECTURE.md, checked on the includes and,
given a build folder, on the calls.

Each folder of src/ is a module and may use its own code and that of the
modules USES names for it: include their headers (but never another
module's internal.h) and public headers (include/poet/, by OWNER), and
call what they define (read from the object files with nm), and name
what they export with a prefix of theirs (PREFIXES). tools/ sees
the public headers alone; the public headers a device builds with see
only each other and freestanding ones; base, ops and device include no
host header. No two files of the library or the tool call each other in a
loop, and no source is longer than MAX_LINES without saying why at its
top. Prints every crossing and exits 1 if there is one.
Usage: tests/layers.py [ROOT [BUILD]]"""
import os
import re
import subprocess
import sys

# module: the modules it may use, by include or by call (its own always),
# from the bottom up; the picture and the reasons are docs/ARCHITECTURE.md
USES = {
    "base": [],
    "ops": ["base"],
    "device": ["base", "ops"],
    "host": ["base"],
    "graph": ["base", "ops", "host"],
    "cost": ["base", "ops", "device", "graph", "host"],
    "schedule": ["base", "ops", "graph", "cost", "host"],
    "plan": ["base", "ops", "graph", "cost", "schedule", "host"],
    "runtime": ["base", "ops", "device", "graph", "cost", "schedule", "host"],
    "learn": ["base", "ops", "device", "graph", "cost", "schedule", "host", "runtime"],
    "onnx": ["base", "ops", "graph", "host"],
}
ORDER = list(USES)  # bottom up
# the module each public header belongs to (poet.h, the umbrella, is the tools')
OWNER = {
    "status.h": "base", "transfer.h": "base", "ops.h": "ops", "device.h": "device", "sparse.h": "device", "alq.h": "device",
    "file.h": "host", "storage.h": "host", "graph.h": "graph", "cost.h": "cost", "schedule.h": "schedule",
    "plan.h": "plan", "engine.h": "runtime", "train.h": "runtime", "patch.h": "runtime", "runtime.h": "runtime",
    "update.h": "learn", "dress.h": "learn", "quantize.h": "learn", "onnx.h": "onnx", "poet.h": None,
}
# Besides poet_ (the public API), the prefixes a module's external symbols
# may have: libpoet and libpoet_device are linked into other people's
# programs and firmware, where a bare gemm or find would collide.
PREFIXES = {
    "base": ["sha256_", "crc32_"],
    "ops": ["op_"],
    "device": ["kernel_", "image_", "dev_"],
    "host": ["host_", "apart_", "json_"],
    "graph": [],
    "cost": ["profile_", "instance_"],
    "schedule": ["stage_", "placed_", "later_", "mem_trace_"],
    "plan": ["plan_", "lp_", "csc_", "cbc_", "clp_", "glpk_", "mip_", "form_", "milp_", "fast_", "fates_", "greedy_",
             "progress_"],
    "runtime": ["dma_", "image_", "data_"],
    "learn": [],
    "onnx": ["im_", "onnx_", "attr_", "tensor_", "fold_", "reshape_", "squeeze_"],
}
# a source longer than this states why at its top ("Long because ...")
MAX_LINES = 800
# the public headers the device library is built from: freestanding, and
# including only each other
DEVICE_HEADERS = {"status.h", "transfer.h", "ops.h", "device.h", "sparse.h", "alq.h"}
# system headers a freestanding build has (string.h: memcpy and its kin,
# which every C toolchain for a board provides)
FREESTANDING = {"stdint.h", "stddef.h", "stdbool.h", "stdarg.h", "float.h", "limits.h", "string.h", "immintrin.h"}

INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]', re.M)


def includes(path):
    with open(path, encoding="utf-8") as f:
        return INCLUDE.findall(f.read())


def check(root):
    problems = []
    src = os.path.join(root, "src")
    for module in sorted(os.listdir(src)):
        folder = os.path.join(src, module)
        if not os.path.isdir(folder):
            continue
        if module not in USES:
            problems.append(f"src/{module}/: a module the rules do not know (add it to tests/layers.py and "
                            f"docs/ARCHITECTURE.md)")
            continue
        for dirpath, _, names in os.walk(folder):
            for name in sorted(names):
                if not name.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                for kind, inc in includes(path):
                    if inc.startswith("poet/") and kind == '"':
                        owner = OWNER.get(inc[5:], "unknown")
                        if owner == "unknown":
                            problems.append(f"{rel}: \"{inc}\": a public header OWNER does not know")
                        elif owner != module and owner not in USES[module]:
                            problems.append(f"{rel}: \"{inc}\": {module} may not use {owner}")
                    if kind == "<" or inc.startswith("poet/") or inc == "onnx.pb-c.h":
                        if module in ("base", "ops", "device") and kind == "<" and inc not in FREESTANDING:
                            problems.append(f"{rel}: <{inc}> is not freestanding (the device library must build "
                                            f"without host headers)")
                        if module in ("base", "ops", "device") and inc.startswith("poet/") and \
                                inc[5:] not in DEVICE_HEADERS:
                            problems.append(f"{rel}: \"{inc}\" is not a device header")
                        continue
                    target = os.path.normpath(os.path.join(dirpath, inc))
                    parts = os.path.relpath(target, src).split(os.sep)
                    if parts[0] == ".." or len(parts) < 2:
                        problems.append(f"{rel}: \"{inc}\" lies outside src/")
                        continue
                    if parts[0] != module and parts[0] not in USES[module]:
                        problems.append(f"{rel}: \"{inc}\": {module} may not include {parts[0]}")
                    elif parts[0] != module and parts[-1] == "internal.h":
                        problems.append(f"{rel}: \"{inc}\": a module's internal.h is its own")
    for name in sorted(os.listdir(os.path.join(root, "tools"))):
        if name.endswith((".c", ".h")):
            for kind, inc in includes(os.path.join(root, "tools", name)):
                if kind == '"' and (inc.startswith("..") or "/src/" in inc):
                    problems.append(f"tools/{name}: \"{inc}\": tools see the public API only")
    pub = os.path.join(root, "include", "poet")
    for name in sorted(DEVICE_HEADERS):
        for kind, inc in includes(os.path.join(pub, name)):
            if (kind == "<" and inc not in FREESTANDING) or (kind == '"' and inc[5:] not in DEVICE_HEADERS):
                problems.append(f"include/poet/{name}: {inc}: a device header includes only device headers "
                                f"and freestanding ones")
    return problems


def long_files(root):
    problems = []
    for top in ("src", "tools", "include"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if name.endswith((".c", ".h")):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as f:
                        text = f.read()
                    lines = text.count("\n")
                    if lines > MAX_LINES and "Long because" not in text[:2000]:
                        problems.append(f"{os.path.relpath(path, root)}: {lines} lines, and its opening comment "
                                        f"does not say why (\"Long because ...\")")
    return problems


def symbols(obj):
    """(defined, undefined) external symbols of an object file."""
    out = subprocess.run(["nm", obj], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRCWV":
            # AddressSanitizer marks each global with an "__odr_asan.NAME" of its own: NAME is what is defined
            defined.add(parts[2].removeprefix("__odr_asan."))
    return defined, undefined


def objects(root, build):
    """The library's, the device library's and the tool's object files whose
    sources still exist, as (source path, object path)."""
    found = []
    for target in ("poet.dir", "poet_device.dir", "poet-cli.dir"):
        base = os.path.join(build, "CMakeFiles", target)
        for dirpath, _, names in os.walk(base):
            for name in sorted(names):
                if name.endswith(".c.o"):
                    obj = os.path.join(dirpath, name)
                    src = os.path.relpath(obj, base)[:-2]
                    if os.path.exists(os.path.join(root, src)):
                        found.append((src, obj))
    return found


def module_of(src):
    parts = src.split(os.sep)
    return parts[1] if parts[0] == "src" else parts[0]


def circles(edges):
    """The strongly connected components of more than one file (Tarjan's)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


DECLARATION = re.compile(r"^[A-Za-z_][\w \t*]*?\b(poet_\w+)\s*\(", re.M)


def declared(root):
    """The module of each public function: the owner of the header that
    declares it (poet_fail is base's, whichever file implements it)."""
    modules = {}
    pub = os.path.join(root, "include", "poet")
    for name in sorted(os.listdir(pub)):
        if name.endswith(".h") and OWNER.get(name):
            with open(os.path.join(pub, name), encoding="utf-8") as f:
                for fn in DECLARATION.findall(f.read()):
                    modules.setdefault(fn, OWNER[name])
    return modules


def check_calls(root, build):
    problems = []
    public = declared(root)
    objs = objects(root, build)
    if not objs:
        return [f"{build}: no object files of poet (build it first)"]
    rank = {m: i for i, m in enumerate(ORDER + ["tools"])}
    owner, needs = {}, {}
    for src, obj in objs:
        defined, undefined = symbols(obj)
        needs[src] = undefined
        mod = module_of(src)
        for s in sorted(defined):
            if mod != "tools" and not s.startswith(tuple(["poet_"] + PREFIXES.get(mod, []))):
                problems.append(f"{src}: defines {s}, which lacks poet_ or a prefix of {mod}'s (PREFIXES)")
        for s in defined:
            # a symbol defined twice (poet_fail: base's for a board, host's
            # on a host) belongs to the lower module, whose interface it is
            prev = owner.get(s)
            if prev is None or rank[module_of(src)] < rank[module_of(prev)]:
                owner[s] = src
    edges = {}
    for src, undefined in needs.items():
        mod = module_of(src)
        for s in sorted(undefined):
            if s not in owner or owner[s] == src:
                continue
            target = owner[s]
            tmod = public.get(s, module_of(target))
            if mod == "tools":
                if tmod != "tools" and not s.startswith("poet_"):
                    problems.append(f"{src}: calls {s} of {target}: tools call the public API only")
            elif tmod != mod and tmod not in USES.get(mod, []):
                problems.append(f"{src}: calls {s} of {target}: {mod} may not use {tmod}")
            edges.setdefault(src, set()).add(target)
    for comp in circles(edges):
        problems.append("files that call each other in a loop: " + ", ".join(comp))
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems = check(root) + long_files(root)
    if len(sys.argv) > 2:
        problems += check_calls(root, sys.argv[2])
    for p in problems:
        print("FAIL:", p)
    print(f"layers: {len(problems)} crossings of the rules")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
