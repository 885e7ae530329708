"""Shared by the benchmark drivers that run one C program printing a JSON
report: the --svg, --json and --save options, and running or loading."""
import json
import subprocess


def add_options(ap):
    ap.add_argument("--svg")
    ap.add_argument("--json", help="read this report instead of running (a saved run's output)")
    ap.add_argument("--save", help="write the run's report (JSON) here")


def run_or_load(a, argv):
    """The report: from --json, or from running argv (saved to --save)."""
    if a.json:
        with open(a.json) as f:
            return json.load(f)
    out = subprocess.run([str(x) for x in argv], check=True, capture_output=True, text=True).stdout
    if a.save:
        with open(a.save, "w") as f:
            f.write(out)
    return json.loads(out)
