#!/usr/bin/env python3
"""The module rules of docs/ARCHITECTURE.md, checked on the includes.

Each folder of src/ is a module and may include its own headers, the
public headers (include/poet/) and the headers of the modules below it
(but never another module's internal.h);
tools/ sees the public headers alone; the public headers a device builds
with see only each other. Prints every include that crosses a rule and
exits 1 if there is one. Usage: tests/layers.py [ROOT]"""
import os
import re
import sys

# module: the modules it may include from (its own always)
BELOW = {
    "base": [],
    "ops": ["base"],
    "device": ["base", "ops"],
    "host": ["base"],
    "graph": ["base", "ops", "host"],
    "cost": ["base", "ops", "graph", "host"],
    "schedule": ["base", "cost", "graph", "host"],
    "plan": ["base", "schedule", "cost", "graph", "host"],
    "runtime": ["base", "ops", "device", "schedule", "cost", "graph", "host"],
    "learn": ["base"],
    "onnx": ["base", "ops", "graph", "host"],
}
# the public headers the device library is built from: freestanding, and
# including only each other
DEVICE_HEADERS = {"status.h", "ops.h", "device.h", "sparse.h", "alq.h"}
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
        if module not in BELOW:
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
                    if parts[0] != module and parts[0] not in BELOW[module]:
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


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems = check(root)
    for p in problems:
        print("FAIL:", p)
    print(f"layers: {len(problems)} includes cross the rules")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
