"""A short run of bench/fewshot.c (20 tasks, 60 meta-training episodes):
every arm adapts well above chance, trains inside exactly the arena its
schedule planned, and the partial arms need less than full adaptation."""
import json
import subprocess
import sys

out = subprocess.run([sys.argv[1], "20", "7", "60", "0.5"], capture_output=True, text=True)
if out.returncode:
    sys.exit(f"fewshot: exit {out.returncode}: {out.stderr.strip()}")
r = json.loads(out.stdout)
failures = []
arms = {a["arm"]: a for a in r["arms"]}
for a in r["arms"]:
    for s in ("1shot", "5shot"):
        if not a["acc_" + s] > 50:  # chance: 25
            failures.append(f"{a['arm']} {s}: accuracy {a['acc_' + s]}")
        if a["planned_" + s] != a["high_water_" + s]:
            failures.append(f"{a['arm']} {s}: high-water {a['high_water_' + s]} != planned {a['planned_' + s]}")
        if a["planned_" + s] > a["keep_all_" + s]:
            failures.append(f"{a['arm']} {s}: planned arena above the keep-all peak")
full = arms["full adaptation"]
for name in ("classifier only", "biases and classifier", "p-Meta-style"):
    if not arms[name]["keep_all_5shot"] < full["keep_all_5shot"]:
        failures.append(f"{name}: keep-all peak not below full adaptation's")
    if not arms[name]["persistent_5shot"] < full["persistent_5shot"]:
        failures.append(f"{name}: persistent state not below full adaptation's")
for f in failures:
    print("FAILED:", f)
accs = ", ".join(f"{name}: {a['acc_5shot']:.1f}" for name, a in arms.items())
print(f"fewshot: {len(r['arms'])} arms, {len(failures)} failures (5-shot accuracies: {accs})")
sys.exit(1 if failures else 0)
