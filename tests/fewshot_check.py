"""A short run of bench/fewshot.c (20 tasks, 60 meta-training episodes):
every arm adapts well above chance, trains inside exactly the arena its
schedule planned, the partial arms need less than full adaptation, and the
p-Meta-style arm keeps to its memory budget.
With the ceiling (an oracle over rate multipliers): a frozen body's
multiplier changes nothing, so the classifier-only arm's best is its first
body multiplier, 0."""
import json
import subprocess
import sys

out = subprocess.run([sys.argv[1], "20", "7", "60", "0.5", "0.4", "ceiling"], capture_output=True, text=True)
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
    if not a["selection_5shot_lo"] <= a["selection_5shot_hi"]:
        failures.append(f"{a['arm']}: selection accuracies out of order")
    for s in ("1shot", "5shot"):
        best, _, body = a["ceiling_" + s]
        if not 0 <= best <= 100:
            failures.append(f"{a['arm']} {s}: ceiling {best}")
        if a["arm"] == "classifier only" and body != 0:
            failures.append(f"classifier only {s}: a frozen body's multiplier changed the ceiling (best at x{body})")
full = arms["full adaptation"]
for name in ("classifier only", "biases and classifier", "p-Meta-style"):
    if not arms[name]["keep_all_5shot"] < full["keep_all_5shot"]:
        failures.append(f"{name}: keep-all peak not below full adaptation's")
    if not arms[name]["persistent_5shot"] < full["persistent_5shot"]:
        failures.append(f"{name}: persistent state not below full adaptation's")
# the memory budget given (0.4 of full adaptation's keep-all peak) holds for the p-Meta-style arm
if not arms["p-Meta-style"]["keep_all_5shot"] <= 0.4 * full["keep_all_5shot"]:
    failures.append(f"p-Meta-style: keep-all peak {arms['p-Meta-style']['keep_all_5shot']} above 0.4x full adaptation's")
for f in failures:
    print("FAILED:", f)
accs = ", ".join(f"{name}: {a['acc_5shot']:.1f}" for name, a in arms.items())
print(f"fewshot: {len(r['arms'])} arms, {len(failures)} failures (5-shot accuracies: {accs})")
sys.exit(1 if failures else 0)
