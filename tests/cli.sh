#!/usr/bin/env bash
# The CLI contract: commands that must work, and bad input that must give a
# one-line error naming the problem and a non-zero exit, never a crash.
set -u
poet=$1
data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/testlib.sh"

ok "help" "$poet" --help
ok "models" "$poet" models
ok "models json" "$poet" models --json
has "models json lists trainable" '"trainable"' "$tmp/out"
ok "devices json" "$poet" devices --json
has "devices json lists jetsontx2" '"jetsontx2"' "$tmp/out"
ok "graph help" "$poet" graph --help
ok "graph zoo" "$poet" graph --model resnet18_cifar --device m4 --json --dot "$tmp/g.dot" --out "$tmp/g.json"
for field in nodes edges forward_activation_bytes keep_all_peak_bytes min_budget_bytes full_memory_energy_j \
    full_memory_time_s parameter_bytes; do
    has "graph json has $field" "\"$field\"" "$tmp/out"
done
has "dot file" "digraph" "$tmp/g.dot"
cp "$tmp/out" "$tmp/first.json"
ok "graph own format read back" "$poet" graph --instance "$tmp/g.json" --json
if cmp -s "$tmp/out" "$tmp/first.json"; then passed=$((passed + 1)); else
    failed=$((failed + 1))
    echo "FAIL: figures differ after writing and reading the graph file"
fi
ok "graph reference" "$poet" graph --instance "$data/reference/linear__m4.json" --json
has "reference keep-all peak" '"keep_all_peak_bytes":[[:space:]]*7416' "$tmp/out"
ok "graph batch" "$poet" graph --model cnn_fashion --device a72 --batch 64

refuse "no command" "missing command" "$poet"
refuse "unknown command" "unknown command 'fly'" "$poet" fly
refuse "unknown option" "unknown option --frobnicate" "$poet" graph --frobnicate
refuse "missing value" "missing value after --model" "$poet" graph --model
refuse "model and instance" "exactly one" "$poet" graph --model linear --device m4 --instance x.json
refuse "neither" "exactly one" "$poet" graph --device m4
refuse "no device" "need --device" "$poet" graph --model linear
refuse "unknown model" "unknown model 'gpt9'" "$poet" graph --model gpt9 --device m4
refuse "unknown device" "unknown device 'z80'" "$poet" graph --model linear --device z80
refuse "bad batch" "--batch must be" "$poet" graph --model linear --device m4 --batch 0
refuse "batch garbage" "--batch must be" "$poet" graph --model linear --device m4 --batch 12abc
refuse "batch overflow" "--batch must be" "$poet" graph --model linear --device m4 --batch 99999999999999999999
refuse "missing file" "cannot open" "$poet" graph --instance "$tmp/none.json"
refuse "directory" "not a regular file" "$poet" graph --instance "$tmp"
: >"$tmp/empty.json"
refuse "empty file" "invalid JSON" "$poet" graph --instance "$tmp/empty.json"
head -c 5000 "$data/reference/vgg16__m4.json" >"$tmp/trunc.json"
refuse "truncated file" "invalid JSON" "$poet" graph --instance "$tmp/trunc.json"
head -c 4096 /dev/urandom >"$tmp/garbage.json"
# random bytes may happen to start like a JSON value: either error names JSON
refuse "binary garbage" "JSON" "$poet" graph --instance "$tmp/garbage.json"
printf '{"format":"poet-device"} trailing' >"$tmp/trailing.json"
refuse "trailing data" "after the document" "$poet" graph --instance "$tmp/trailing.json"
printf '%*s' 100000 '' | tr ' ' '[' >"$tmp/deep.json"
refuse "deeply nested" "invalid JSON" "$poet" graph --instance "$tmp/deep.json"
sed 's/"ram_bytes": 3136/"ram_bytes": -3136/' "$data/reference/linear__m4.json" >"$tmp/neg.json"
refuse "negative bytes" "ram_bytes" "$poet" graph --instance "$tmp/neg.json"
sed 's/\[25, 26\]/[26, 25]/' "$data/reference/linear__m4.json" >"$tmp/cycle.json"
refuse "backward edge" "topological" "$poet" graph --instance "$tmp/cycle.json"
sed 's/\[25, 26\]/[25, 99]/' "$data/reference/linear__m4.json" >"$tmp/range.json"
refuse "edge out of range" "outside" "$poet" graph --instance "$tmp/range.json"
refuse "unwritable dot" "cannot write" "$poet" graph --model linear --device m4 --dot /nonexistent/dir/g.dot
echo '{"format":"poet-device","version":1,"name":"x","flops_per_s":-5,"flops_per_j":1,"pagein_latency_s":0,
 "pagein_bytes_per_s":1,"pageout_latency_s":0,"pageout_bytes_per_s":1,"memory_power_w":1}' >"$tmp/dev.json"
refuse "bad device file" "flops_per_s" "$poet" graph --model linear --device "$tmp/dev.json"

# ---- plan, simulate, encode, decode, show ----
ok "planners" "$poet" planners --json
has "planners list hybrid" '"hybrid"' "$tmp/out"
for planner in keep-all chen-sqrt remat-dtr paging hybrid portfolio; do
    ok "plan $planner" "$poet" plan --instance "$data/reference/vgg16_cifar__m4.json" --budget 70% \
        --planner "$planner" --json --allow-infeasible --out "$tmp/$planner.json"
    for field in planner status energy_j lower_bound_j gap peak_ram_bytes placed_peak_bytes compute_time_s \
        time_with_paging_s recomputations page_ins page_outs solve_seconds found_seconds validated; do
        has "plan json has $field" "\"$field\"" "$tmp/out"
    done
    if grep -q '"status":[[:space:]]*"feasible"' "$tmp/out"; then
        grep -v -e solve_seconds -e found_seconds -e '"status"' "$tmp/out" >"$tmp/planned"
        ok "simulate $planner" "$poet" simulate "$tmp/$planner.json" --json
        grep -v -e solve_seconds -e found_seconds -e '"status"' "$tmp/out" >"$tmp/simulated"
        if cmp -s "$tmp/planned" "$tmp/simulated"; then passed=$((passed + 1)); else
            failed=$((failed + 1))
            echo "FAIL: simulate of $planner differs from plan: $(diff "$tmp/planned" "$tmp/simulated" | head -5)"
        fi
    else
        [ ! -e "$tmp/$planner.json" ] && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: file written without a schedule"; }
    fi
done
ok "plan infeasible is a result" "$poet" plan --model linear --device m4 --budget 100 --json --allow-infeasible
has "infeasible status" '"status":[[:space:]]*"infeasible"' "$tmp/out"
has "infeasible says the smallest budget" 'bytes at least' "$tmp/out"
has "no schedule, no time it was found" '"found_seconds":[[:space:]]*null' "$tmp/out"
"$poet" plan --model linear --device m4 --budget 100 --json >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 3 ] && grep -q '"status":[[:space:]]*"infeasible"' "$tmp/out"; then passed=$((passed + 1)); else
    failed=$((failed + 1))
    echo "FAIL: a plan without a schedule must exit 3 and still report"
fi
has "an infeasible budget names the stage, its node and the tensors that set the floor" \
    "stage [0-9]* computes node [0-9]* '[^']*' ([a-z_0-9]*), whose [0-9]* B output and inputs must be in RAM at once: '[^']*' [0-9]* B" \
    "$tmp/out"
# budgets as people write them: units (K = 1024, KB = 1000), and the device's RAM
for spec in 64KiB:65536 256k:262144 1.5MB:1500000 2M:2097152 300000B:300000; do
    ok "budget $spec" "$poet" plan --model linear --device m4 --budget "${spec%%:*}" --json --allow-infeasible
    has "budget ${spec%%:*} is ${spec##*:} bytes" "\"budget_bytes\":[[:space:]]*${spec##*:}," "$tmp/out"
done
refuse "budget unit unknown" "--budget must be" "$poet" plan --model linear --device m4 --budget 12parsecs
refuse "budget fractional bytes" "--budget must be" "$poet" plan --model linear --device m4 --budget 100.5
ok "budget ram" "$poet" plan --model cnn_digits --device m4 --batch 8 --budget ram --json --time-limit 5
ram_budget=$(sed -n 's/.*"budget_bytes":[[:space:]]*\([0-9]*\).*/\1/p' "$tmp/out")
if [ -n "$ram_budget" ] && [ "$ram_budget" -gt 100000 ] && [ "$ram_budget" -lt 262144 ]; then passed=$((passed + 1)); else
    failed=$((failed + 1))
    echo "FAIL: --budget ram on the m4 (256 KiB) planned for '$ram_budget' bytes"
fi
refuse "budget ram without a stated RAM" "does not state its RAM" "$poet" plan \
    --instance "$data/reference/linear__m4.json" --budget ram
ok "over the device's RAM warns" "$poet" plan --model cnn_digits --device m4 --budget 100% --planner keep-all
has "RAM warning" "more than m4's 256.0 KiB" "$tmp/err"
# --budget ram is the whole RAM: the firmware's fixed part, and all that training keeps beside the arena
ok "budget ram on the board's profile" "$poet" export --model cnn_digits --device stm32f405 --batch 8 --budget ram \
    --time-limit 5 --out "$tmp/ram.img" --json
whole=$(( $(sed -n 's/.*"memory_bytes":[[:space:]]*\([0-9]*\).*/\1/p' "$tmp/out") + 9216 ))
expect "budget ram: the whole RAM ($whole B) fits the board's 196608 B and uses most of it" \
    '[ "$whole" -le 196608 ] && [ "$whole" -gt 180000 ]'
ok "plan reports the whole RAM" "$poet" plan --model cnn_digits --device stm32f405 --batch 8 --budget ram --time-limit 5
kib=$(/usr/bin/python3 -c "print('%.1f KiB' % ($whole / 1024))")
has "plan's whole RAM is the exported image's with the firmware's ($kib)" "device RAM *$kib in all: firmware 9.0 KiB" "$tmp/out"
refuse "budget ram too small for what training keeps" "do not even hold" "$poet" plan --model resnet_small \
    --device stm32f405 --budget ram
# poet fit: the smallest whole RAM per batch and spec, and what fits the board
ok "fit on the board" "$poet" fit --model cnn_digits --device stm32f405 --batch 8 --batch 16 --train all --json
cp "$tmp/out" "$tmp/fit.json"
fitfield() { /usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$tmp/fit.json" "$1"; }
expect "fit: batch 8 fits the board, batch 16 does not, so 8 is the largest" \
    '[ "$(fitfield "d[\"fits\"][0][\"fits\"]")" = True ] && [ "$(fitfield "d[\"fits\"][1][\"fits\"]")" = False ] && [ "$(fitfield "d[\"largest_batch\"][\"all\"]")" = 8 ]'
arena=$(fitfield 'd["fits"][0]["arena_bytes"]') predicted=$(fitfield 'd["fits"][0]["ram_total_bytes"]')
ok "export at fit's arena" "$poet" export --model cnn_digits --device stm32f405 --batch 8 --budget "$arena" \
    --out "$tmp/fit.img" --json
whole=$(( $(sed -n 's/.*"memory_bytes":[[:space:]]*\([0-9]*\).*/\1/p' "$tmp/out") + 9216 ))
expect "fit's whole RAM ($predicted B) is the exported image's ($whole B)" '[ "$whole" = "$predicted" ]'
refuse "fit: a bad batch" "--batch must be" "$poet" fit --model cnn_digits --device stm32f405 --batch 0
# frozen parameters read in place from flash take no RAM: exactly their bytes less than with --frozen ram
for where in ram flash; do
    ok "fit last:2 with --frozen $where" "$poet" fit --model cnn_digits --device stm32f405 --batch 8 --train last:2 \
        --frozen $where --json
    cp "$tmp/out" "$tmp/fit-$where.json"
done
fitof() { /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["fits"][0][sys.argv[2]])' "$tmp/fit-$1.json" "$2"; }
in_flash=$(fitof flash flash_read_in_place_bytes)
expect "fit: --frozen flash saves exactly the $in_flash B it reads in place" \
    '[ "$in_flash" -gt 0 ] && [ $(( $(fitof ram ram_total_bytes) - $(fitof flash ram_total_bytes) )) = "$in_flash" ] && [ "$(fitof ram flash_read_in_place_bytes)" = 0 ]'
ok "export last:2 at fit's arena" "$poet" export --model cnn_digits --device stm32f405 --batch 8 --train last:2 \
    --budget "$(fitof flash arena_bytes)" --out "$tmp/flash.img" --json
whole=$(( $(sed -n 's/.*"memory_bytes":[[:space:]]*\([0-9]*\).*/\1/p' "$tmp/out") + 9216 ))
expect "fit's whole RAM with frozen weights in flash is the image's ($whole B)" '[ "$whole" = "$(fitof flash ram_total_bytes)" ]'
for fused in "" --fused-update; do
    ok "train${fused:+ $fused}" "$poet" train --model cnn_digits --device m4 --batch 8 --budget 60% --steps 3 \
        --time-limit 3 --json --quiet $fused
    cp "$tmp/out" "$tmp/train-fused${fused:+-on}.json"
done
sha_of() { sed -n 's/.*"weights_sha256":[[:space:]]*"\([0-9a-f]*\)".*/\1/p' "$1"; }
persistent_of() { sed -n 's/.*"persistent_bytes":[[:space:]]*\([0-9]*\).*/\1/p' "$1"; }
expect "the fused update trains to the same weights in less RAM" \
    '[ -n "$(sha_of "$tmp/train-fused.json")" ] && [ "$(sha_of "$tmp/train-fused.json")" = "$(sha_of "$tmp/train-fused-on.json")" ] && [ "$(persistent_of "$tmp/train-fused-on.json")" -lt "$(persistent_of "$tmp/train-fused.json")" ]'
refuse "update refuses the fused update" "whole gradient" "$poet" update --model cnn_digits --data digits --fused-update
refuse "a bad --frozen" "--frozen must be flash or ram" "$poet" train --model cnn_digits --device m4 --budget 50% \
    --frozen rom
sed 's/"ram_bytes": 1048576/"ram_bytes": 1048576, "image_flash_bytes": 16384/' >"$tmp/small-flash.json" <<'PROFILE'
{"format": "poet-device", "version": 1, "name": "small-flash", "flops_per_s": 1e7, "flops_per_j": 1e8,
 "pagein_latency_s": 0.0001, "pagein_bytes_per_s": 4e6, "pageout_latency_s": 0.0001, "pageout_bytes_per_s": 4e6,
 "memory_power_w": 0.3, "ram_bytes": 1048576}
PROFILE
ok "fit on a board whose flash the parameters outgrow" "$poet" fit --model cnn_digits --device "$tmp/small-flash.json" \
    --train biases --batch 1
has "fit says the parameters exceed the flash the image lies in" "exceed the 16.0 KiB of flash" "$tmp/out"
# every option a command accepts is in its --help
for c in models devices graph planners plan simulate show encode decode sweep train import export emulate update fit; do
    "$poet" $c --help >"$tmp/help" 2>&1
    missing=""
    for o in $("$poet" $c --help-options); do grep -q -- "$o\b" "$tmp/help" || missing="$missing $o"; done
    expect "poet $c --help names every option it accepts${missing:+ (missing:$missing)}" '[ -z "$missing" ]'
done
# every option the README and docs show a command with is one it accepts
docs_root=$(cd "$(dirname "$0")/.." && pwd)
/usr/bin/python3 - "$docs_root" >"$tmp/doc-options" <<'EOF'
import glob, re, sys
root = sys.argv[1]
for path in [f"{root}/README.md"] + sorted(glob.glob(f"{root}/docs/*.md")):
    text, block = open(path).read(), False
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            block = not block
        elif block and re.match(r"\s*build/poet \w", line):
            cmd = line
            while cmd.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd.rstrip()[:-1] + " " + lines[i]
            cmd = cmd.split("#")[0]
            words = cmd.split()
            for w in words[2:]:
                if w.startswith("--"):
                    print(path[len(root) + 1:], words[1], w.split("=")[0])
        i += 1
EOF
unknown=""
while read -r file command option; do
    "$poet" "$command" --help-options 2>/dev/null | grep -qx -- "$option" || unknown="$unknown $file:$command:$option"
done <"$tmp/doc-options"
expect "the README's and docs' examples use only options their commands accept ($(wc -l <"$tmp/doc-options") read)${unknown:+ (unknown:$unknown)}" \
    '[ -s "$tmp/doc-options" ] && [ -z "$unknown" ]'
ok "devices list RAM" "$poet" devices
has "devices: the board's RAM and its firmware's share" "stm32f405 .* 192.0 KiB *9.0 KiB" "$tmp/out"
for spec in 64kb:64000 64kib:65536 1mb:1000000; do
    ok "budget $spec (units in any case)" "$poet" plan --model linear --device m4 --budget "${spec%%:*}" --json \
        --allow-infeasible
    has "budget ${spec%%:*} is ${spec##*:} bytes" "\"budget_bytes\":[[:space:]]*${spec##*:}," "$tmp/out"
done
cat >"$tmp/tiny.json" <<'JSON'
{"format": "poet-device", "version": 1, "name": "tiny", "flops_per_s": 6e6, "flops_per_j": 5e8,
 "pagein_latency_s": 1e-4, "pagein_bytes_per_s": 4e6, "pageout_latency_s": 1e-4, "pageout_bytes_per_s": 4e6,
 "memory_power_w": 0.3, "ram_bytes": 200000, "flash_bytes": 1000}
JSON
ok "device with RAM and flash" "$poet" plan --model cnn_digits --device "$tmp/tiny.json" --batch 8 --budget 42% \
    --planner paging
has "flash warning" "more than tiny's 1000 B of flash" "$tmp/err"
ok "budget ram from a profile" "$poet" plan --model cnn_digits --device "$tmp/tiny.json" --batch 8 --budget ram --json \
    --planner keep-all --allow-infeasible
has "budget ram is what the profile's RAM leaves" '"budget_bytes":[[:space:]]*1[0-9][0-9][0-9][0-9][0-9],' "$tmp/out"
# the runtime limit: by default compute and every transfer (serial), POET's compute alone on request
ok "runtime model compute: paging-only at factor 1.0" "$poet" plan --model cnn_digits --device m4 --batch 8 --budget 42% \
    --runtime-factor 1.0 --planner paging --runtime-model compute --json --quiet
has "runtime model compute reported" '"runtime_model":[[:space:]]*"compute"' "$tmp/out"
expect "under POET's accounting the step takes longer than the limit once its transfers count" \
    "/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not d[\"compute_time_s\"] + d[\"transfer_time_s\"] > d[\"runtime_budget_s\"] * 1.001)' '$tmp/out'"
"$poet" plan --model cnn_digits --device m4 --batch 8 --budget 42% --runtime-factor 1.0 --planner paging --quiet \
    >"$tmp/out" 2>"$tmp/err"
expect "the same by default: no schedule, exit 3, the note names the runtime limit" \
    "[ $? -eq 3 ] && grep -q 'within the runtime limit' '$tmp/out'"
ok "runtime model serial (the default), planned" "$poet" plan --model cnn_digits --device m4 --batch 8 --budget 42% \
    --runtime-factor 1.2 --json --quiet --out "$tmp/serial.json" --time-limit 5
expect "the serial schedule's compute and transfers fit the limit, and so does its overlapped time" \
    "/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (d[\"runtime_model\"] == \"serial\" and d[\"compute_time_s\"] + d[\"transfer_time_s\"] <= d[\"runtime_budget_s\"] * (1 + 1e-9) and d[\"time_with_paging_s\"] <= d[\"runtime_budget_s\"] * (1 + 1e-9)))' '$tmp/out'"
has "the schedule file says how its runtime was counted" '"runtime_counts_paging":[[:space:]]*true' "$tmp/serial.json"
ok "encode a serial schedule" "$poet" encode "$tmp/serial.json" --out "$tmp/serial.bin"
ok "its graph" "$poet" graph --model cnn_digits --device m4 --batch 8 --out "$tmp/cnn8.json"
ok "decode it" "$poet" decode "$tmp/serial.bin" --out "$tmp/serial2.json" --instance "$tmp/cnn8.json"
has "the binary form keeps the runtime model" '"runtime_counts_paging":[[:space:]]*true' "$tmp/serial2.json"
refuse "a bad runtime model" "--runtime-model must be serial or compute" "$poet" plan --model linear --device m4 \
    --budget 60% --runtime-model fast
ok "gap" "$poet" plan --model linear --device m4 --budget 60% --gap 5% --json
refuse "bad gap" "--gap" "$poet" plan --model linear --device m4 --budget 60% --gap 2
ok "encode" "$poet" encode "$tmp/paging.json" --out "$tmp/s.bin"
ok "decode" "$poet" decode "$tmp/s.bin" --out "$tmp/s2.json" --instance "$data/reference/vgg16_cifar__m4.json"
ok "simulate decoded" "$poet" simulate "$tmp/s2.json"
ok "simulate binary with graph" "$poet" simulate "$tmp/s.bin" --instance "$data/reference/vgg16_cifar__m4.json"
ok "show" "$poet" show "$tmp/paging.json" --svg "$tmp/s.svg"
has "svg drawn" '<svg' "$tmp/s.svg"
refuse "plan without budget" "--budget is required" "$poet" plan --model linear --device m4
refuse "bad budget" "--budget must be" "$poet" plan --model linear --device m4 --budget lots
refuse "negative budget" "--budget must be" "$poet" plan --model linear --device m4 --budget -5
refuse "huge budget" "--budget must be" "$poet" plan --model linear --device m4 --budget 1e300
refuse "bad factor" "--runtime-factor" "$poet" plan --model linear --device m4 --budget 50% --runtime-factor 0.5
refuse "unknown planner" "unknown planner" "$poet" plan --model linear --device m4 --budget 50% --planner magic
refuse "bad time limit" "--time-limit" "$poet" plan --model linear --device m4 --budget 50% --time-limit -1
refuse "unwritable plan output" "cannot write" "$poet" plan --model linear --device m4 --budget 100% --out /nonexistent/x.json
refuse "binary without graph" "holds no graph" "$poet" simulate "$tmp/s.bin"
refuse "binary for another graph" "different graph" "$poet" simulate "$tmp/s.bin" --model linear --device m4
head -c 20 "$tmp/s.bin" >"$tmp/trunc.bin"
refuse "truncated binary" "checksum" "$poet" simulate "$tmp/trunc.bin" --instance "$data/reference/vgg16_cifar__m4.json"
sed 's/"budget_bytes":[[:space:]]*[0-9]*/"budget_bytes": 10/' "$tmp/keep-all.json" >"$tmp/tight.json" 2>/dev/null
[ -s "$tmp/keep-all.json" ] || cp "$tmp/paging.json" "$tmp/tight.json"
sed -i 's/"budget_bytes":[[:space:]]*[0-9]*/"budget_bytes": 10/' "$tmp/tight.json"
refuse "schedule over its budget" "memory-budget" "$poet" simulate "$tmp/tight.json"
refuse "simulate missing file" "cannot open" "$poet" simulate "$tmp/none.json"

# ---- the MILP planner ----
ok "milp" "$poet" plan --instance "$data/reference/linear__m4.json" --budget 60% --runtime-factor 1.5 \
    --planner milp --quiet --json --deterministic --write-mps "$tmp/model" --out "$tmp/milp.json"
has "milp proves optimality" '"status":[[:space:]]*"optimal"' "$tmp/out"
has "milp certifies a gap" '"gap":[[:space:]]*[0-9]' "$tmp/out"
if [ -s "$tmp/model.mps.gz" ] || [ -s "$tmp/model.mps" ]; then passed=$((passed + 1)); else
    failed=$((failed + 1))
    echo "FAIL: --write-mps wrote nothing"
fi
ok "milp schedule simulates" "$poet" simulate "$tmp/milp.json"
ok "milp remat only" "$poet" plan --instance "$data/reference/linear__m4.json" --budget 60% --planner milp \
    --no-paging --quiet --json
has "remat-only pages nothing" '"page_ins":[[:space:]]*0,' "$tmp/out"
refuse "variants on a baseline" "takes neither" "$poet" plan --model linear --device m4 --budget 60% \
    --planner remat-dtr --no-paging
refuse "both variants" "leave only keep-all" "$poet" plan --model linear --device m4 --budget 60% \
    --planner milp --no-paging --no-remat
refuse "bad threads" "--threads" "$poet" plan --model linear --device m4 --budget 60% --planner milp --threads 0
ls "$tmp" | grep -q 'tmp' && { failed=$((failed + 1)); echo "FAIL: a temporary file was left behind"; }

# ---- budget sweeps ----
ok "sweep" "$poet" sweep --instance "$data/reference/linear__m4.json" --points 3 --json --svg "$tmp/sweep.svg"
has "sweep draws" '<polyline' "$tmp/sweep.svg"
has "sweep has proven points" '"status":[[:space:]]*"optimal"' "$tmp/out"
if grep -q '"validated":[[:space:]]*false' "$tmp/out" && ! grep -q '"status":[[:space:]]*"infeasible"\|"no schedule found"' "$tmp/out"; then
    failed=$((failed + 1)); echo "FAIL: a sweep point with a schedule was not validated"
else passed=$((passed + 1)); fi
ok "sweep names its series" "$poet" sweep --model linear --device m4 --points 2 --series joint,chen-sqrt
has "sweep's progress names the planner of each point" "factor 1.5, chen-sqrt: " "$tmp/err"
refuse "sweep bad points" "--points" "$poet" sweep --model linear --device m4 --points 1
refuse "sweep unknown series" "--series" "$poet" sweep --model linear --device m4 --series joint,magic
refuse "sweep bad factors" "--runtime-factor" "$poet" sweep --model linear --device m4 --runtime-factor 1.5,0.2
refuse "sweep inverted range" "--to" "$poet" sweep --model linear --device m4 --from 90% --to 60%

# ---- training (needs python3-sklearn's digits; scripts/deps.sh --test installs it) ----
ok "train keep-all" "$poet" train --model cnn_digits --device m4 --budget 100% --steps 60 --json --quiet
cp "$tmp/out" "$tmp/train-keep.json"
for field in final_loss test_accuracy weights_sha256 arena_peak_bytes budget_bytes persistent_bytes paged_bytes \
    recomputations device_energy_j host_seconds; do
    has "train JSON has $field" "\"$field\"" "$tmp/train-keep.json"
done
ok "train remat" "$poet" train --model cnn_digits --device m4 --budget 196608 --planner remat-dtr --steps 60 --json --quiet
cp "$tmp/out" "$tmp/train-remat.json"
ok "train paging" "$poet" train --model cnn_digits --device m4 --budget 196608 --planner paging --steps 60 --json \
    --quiet --storage "$tmp/flash.bin"
cp "$tmp/out" "$tmp/train-paging.json"
has "remat schedule recomputes" '"recomputations":[[:space:]]*[1-9]' "$tmp/train-remat.json"
has "paging schedule pages" '"paged_bytes":[[:space:]]*[1-9]' "$tmp/train-paging.json"
if [ -n "$(sha_of "$tmp/train-keep.json")" ] && [ "$(sha_of "$tmp/train-keep.json")" = "$(sha_of "$tmp/train-remat.json")" ] &&
    [ "$(sha_of "$tmp/train-keep.json")" = "$(sha_of "$tmp/train-paging.json")" ]; then passed=$((passed + 1)); else
    failed=$((failed + 1))
    echo "FAIL: weights differ across schedules"
fi
# killed with SIGKILL, then resumed: the same weights as an uninterrupted run
ok "train uninterrupted" "$poet" train --model cnn_digits --device m4 --budget 100% --steps 2500 --json --quiet \
    --checkpoint "$tmp/ck-full" --checkpoint-every 20
cp "$tmp/out" "$tmp/train-full.json"
"$poet" train --model cnn_digits --device m4 --budget 100% --steps 2500 --json --quiet --checkpoint "$tmp/ck" \
    --checkpoint-every 20 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 300); do [ -e "$tmp/ck/checkpoint.poet" ] && break; sleep 0.02; done
sleep 0.3
{
    kill -9 "$pid"
    wait "$pid"
} 2>/dev/null # no "Killed" notice from the shell
killed=$?
ok "train resumed" "$poet" train --model cnn_digits --device m4 --budget 100% --steps 2500 --json --quiet \
    --checkpoint "$tmp/ck" --checkpoint-every 20 --resume
cp "$tmp/out" "$tmp/train-resumed.json"
has "resume started mid-run" '"resumed_at_step":[[:space:]]*[1-9]' "$tmp/train-resumed.json"
has "the checkpoint keeps the schedule" '"planner"' "$tmp/ck/schedule.json"
if [ "$killed" -eq 137 ] && [ "$(sha_of "$tmp/train-full.json")" = "$(sha_of "$tmp/train-resumed.json")" ]; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "FAIL: SIGKILL and resume (exit $killed) do not reach the uninterrupted weights"
fi
printf 'POETCKPT garbage' >"$tmp/ck/checkpoint.poet"
refuse "corrupt checkpoint" "checkpoint" "$poet" train --model cnn_digits --device m4 --budget 100% --steps 5 \
    --checkpoint "$tmp/ck" --resume --quiet
refuse "plan-only model" "plan-only" "$poet" train --model resnet18 --device m4 --budget 50%
refuse "unknown data set" "unknown data set" "$poet" train --model cnn_digits --device m4 --budget 100% --data mnist
refuse "missing data set" "python3-sklearn" "$poet" train --model cnn_digits --device m4 --budget 100% \
    --data-dir "$tmp/nowhere"
mkdir -p "$tmp/baddata"
printf 'not an idx file at all' | gzip >"$tmp/baddata/train-images-idx3-ubyte.gz"
refuse "garbage Fashion-MNIST file" "not an IDX file" "$poet" train --model cnn_fashion --device m4 --budget 100% \
    --data-dir "$tmp/baddata"
printf '1,2,3\n' | gzip >"$tmp/baddata/digits.csv.gz"
refuse "garbage digits file" "expected 64 values" "$poet" train --model cnn_digits --device m4 --budget 100% \
    --data-dir "$tmp/baddata"
head -c 100 /dev/urandom >"$tmp/baddata/digits.csv.gz"
refuse "binary garbage digits file" "digits.csv.gz" "$poet" train --model cnn_digits --device m4 --budget 100% \
    --data-dir "$tmp/baddata"
refuse "wrong data for model" "model 'cnn_fashion' takes 28x28" "$poet" train --model cnn_fashion --device m4 --budget 100% --data digits
refuse "infeasible training budget" "at least" "$poet" train --model cnn_digits --device m4 --budget 10%
has "an infeasible budget comes with the nearest fix: the largest batch whose floor fits" \
    "^poet: note: the nearest fix: --batch [0-9]" "$tmp/err"
"$poet" plan --model cnn_digits --device stm32f405 --batch 16 --budget ram --quiet >"$tmp/out" 2>"$tmp/err"
expect "a batch too large for the board's RAM: no schedule (exit 3)" "[ $? -eq 3 ] && grep -q 'no schedule fits' '$tmp/out'"
has "where the board's RAM goes" "^poet: note: stm32f405's 192.0 KiB of RAM: firmware 9.0 KiB + beside the arena .* leave .* for the arena; the floor is" "$tmp/err"
has "the nearest fix on the board: batch 14 (what poet fit finds)" "the nearest fix: --batch 14 " "$tmp/err"
# your own data (docs/data.md), written by NumPy
/usr/bin/python3 - "$tmp" <<'EOF'
import sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(0)
x, y = rng.random((300, 1, 8, 8), dtype=np.float32), rng.integers(0, 10, 300)
np.save(f"{d}/x.npy", x), np.save(f"{d}/y.npy", y.astype(np.uint8)), np.save(f"{d}/x64.npy", x.astype(">f8"))
np.savez(f"{d}/xy.npz", x=x, y=y)
np.savez_compressed(f"{d}/split.npz", x_train=x[:250], y_train=y[:250], x_test=x[250:], y_test=y[250:])
np.save(f"{d}/x3.npy", rng.random((300, 3, 8, 8), dtype=np.float32))
with open(f"{d}/xy.csv", "w") as f:
    f.write("label," + ",".join(f"p{i}" for i in range(64)) + "\n")
    for i in range(300):
        f.write(f"{y[i]}," + ",".join(repr(float(v)) for v in x[i].ravel()) + "\n")
EOF
data_train=("$poet" train --model cnn_digits --device m4 --budget 50% --epochs 1 --json --quiet)
ok "train on .npy inputs and labels" "${data_train[@]}" --data "$tmp/x.npy" --labels "$tmp/y.npy"
has ".npy: a fifth held out" '"test_examples":[[:space:]]*60,' "$tmp/out"
npy_sha=$(sha_of "$tmp/out")
ok "train on an .npz" "${data_train[@]}" --data "$tmp/xy.npz"
expect "the .npz trains to the .npy's weights" '[ -n "$npy_sha" ] && [ "$(sha_of "$tmp/out")" = "$npy_sha" ]'
ok "train on a .csv with a header" "${data_train[@]}" --data "$tmp/xy.csv"
expect "the .csv trains to the .npy's weights" '[ "$(sha_of "$tmp/out")" = "$npy_sha" ]'
ok "train on big-endian float64 .npy" "${data_train[@]}" --data "$tmp/x64.npy" --labels "$tmp/y.npy"
expect "float64 inputs train to the float32 ones' weights" '[ "$(sha_of "$tmp/out")" = "$npy_sha" ]'
ok "train on a compressed .npz with its test set" "${data_train[@]}" --data "$tmp/split.npz"
has ".npz's own test set" '"test_examples":[[:space:]]*50,' "$tmp/out"
ok "--test-split" "${data_train[@]}" --data "$tmp/xy.npz" --test-split 0.1
has "--test-split 0.1 holds out 30" '"test_examples":[[:space:]]*30,' "$tmp/out"
ok "--test-data" "${data_train[@]}" --data "$tmp/xy.npz" --test-data "$tmp/x.npy" --test-labels "$tmp/y.npy"
has "--test-data's examples" '"test_examples":[[:space:]]*300,' "$tmp/out"
refuse "data of another shape" "holds examples of 3x8x8 values; model 'cnn_digits' takes 8x8" "${data_train[@]}" \
    --data "$tmp/x3.npy" --labels "$tmp/y.npy"
refuse ".npy inputs without labels" "holds inputs only" "${data_train[@]}" --data "$tmp/x.npy"
refuse "a test split of a built-in" "brings its own labels and test set" "${data_train[@]}" --data digits \
    --test-split 0.5
refuse "a bad --test-split" "--test-split must be" "${data_train[@]}" --data "$tmp/xy.npz" --test-split 1
# a schedule planned once, trained as drawn: the same weights as planning in train
ok "plan for train" "$poet" plan --model cnn_digits --device m4 --batch 8 --budget 60% --planner remat-dtr \
    --out "$tmp/sched.json"
ok "train --schedule" "$poet" train --model cnn_digits --device m4 --batch 8 --schedule "$tmp/sched.json" --steps 20 \
    --json --quiet
cp "$tmp/out" "$tmp/train-sched.json"
ok "train planning the same" "$poet" train --model cnn_digits --device m4 --batch 8 --budget 60% --planner remat-dtr \
    --steps 20 --json --quiet
if [ -n "$(sha_of "$tmp/out")" ] && [ "$(sha_of "$tmp/out")" = "$(sha_of "$tmp/train-sched.json")" ]; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "FAIL: train --schedule and train planning the same schedule give different weights"
fi
# --resume trains under the schedule the checkpoint directory keeps, without planning again
ok "train to resume" "$poet" train --model cnn_digits --device m4 --batch 8 --budget 60% --planner remat-dtr \
    --steps 10 --checkpoint-every 5 --checkpoint "$tmp/ck-sched" --quiet
ok "another schedule" "$poet" plan --model cnn_digits --device m4 --batch 8 --budget 100% --planner keep-all \
    --out "$tmp/ck-sched/schedule.json"
ok "resume under the kept schedule" "$poet" train --model cnn_digits --device m4 --batch 8 --budget 60% \
    --planner remat-dtr --steps 20 --checkpoint "$tmp/ck-sched" --resume --json --quiet
has "resumed under the kept schedule" '"planner":[[:space:]]*"keep-all"' "$tmp/out"
refuse "schedule for another batch" "does not fit" "$poet" train --model cnn_digits --device m4 --batch 4 \
    --schedule "$tmp/sched.json" --steps 2
refuse "schedule and budget" "--schedule" "$poet" train --model cnn_digits --device m4 --batch 8 --budget 50% \
    --schedule "$tmp/sched.json"
refuse "schedule and planner" "--schedule holds" "$poet" train --model cnn_digits --device m4 --batch 8 \
    --schedule "$tmp/sched.json" --planner fast
refuse "resume without checkpoint" "--resume needs" "$poet" train --model cnn_digits --device m4 --budget 100% --resume
refuse "epochs and steps" "not both" "$poet" train --model cnn_digits --device m4 --budget 100% --epochs 1 --steps 5
refuse "bad lr" "--lr" "$poet" train --model cnn_digits --device m4 --budget 100% --lr -1
refuse "bad optimizer" "--optimizer" "$poet" train --model cnn_digits --device m4 --budget 100% --optimizer lbfgs
refuse "unwritable storage" "storage" "$poet" train --model cnn_digits --device m4 --budget 196608 --planner paging \
    --steps 5 --storage /nonexistent/flash.bin

# ---- the device image (the device runs are in device.sh) ----
ok "export" "$poet" export --model cnn_digits --device m4 --batch 4 --budget 50% --time-limit 2 --out "$tmp/dev.img" --json
has "export reports the memory" '"memory_bytes"' "$tmp/out"
if [ "$(head -c 7 "$tmp/dev.img")" = POETIMG ]; then passed=$((passed + 1)); else
    failed=$((failed + 1))
    echo "FAIL: export wrote no device image"
fi
refuse "export without --out" "--out" "$poet" export --model cnn_digits --device m4 --budget 50%
refuse "export bad chunk" "--chunk" "$poet" export --model cnn_digits --device m4 --budget 50% --out "$tmp/x" --chunk -3
refuse "export plan-only model" "plan-only" "$poet" export --model vgg16 --device m4 --budget 50% --out "$tmp/x"
refuse "export infeasible budget" "at least" "$poet" export --model cnn_digits --device m4 --budget 10% --out "$tmp/x"
refuse "emulate bad storage" "--storage" "$poet" emulate --model cnn_digits --budget 50% --storage tape
refuse "emulate bad steps" "--steps" "$poet" emulate --model cnn_digits --budget 50% --steps 0
refuse "emulate missing firmware" "no firmware" "$poet" emulate --model cnn_digits --budget 50% \
    --firmware "$tmp/none.elf"
refuse "emulate not a firmware" "not poet's firmware" "$poet" emulate --model cnn_digits --budget 50% \
    --firmware "$tmp/dev.img"
refuse "bad time limit" "--time-limit" "$poet" train --model cnn_digits --device m4 --budget 100% --time-limit 0

# ---- ONNX (tests/data/onnx, written by its make.py; onnx_check compares with PyTorch) ----
onnx=$data/onnx
ok "import" "$poet" import "$onnx/digits_cnn.onnx" --batch 4 --json
has "import reports the parameters" '"params"' "$tmp/out"
ok "graph from ONNX" "$poet" graph --onnx "$onnx/digits_cnn.onnx" --device m4 --batch 8 --json
ok "plan from ONNX" "$poet" plan --onnx "$onnx/digits_cnn.onnx" --device m4 --batch 8 --budget 80% --time-limit 2 --json
ok "export from ONNX" "$poet" export --onnx "$onnx/digits_cnn.onnx" --device m4 --batch 4 --budget 90% --time-limit 2 \
    --out "$tmp/onnx.img"
ok "train from ONNX and back" "$poet" train --onnx "$onnx/digits_cnn.onnx" --data digits --device m4 --batch 16 \
    --budget 90% --time-limit 2 --steps 30 --json --quiet --onnx-out "$tmp/trained.onnx"
ok "the trained model reads back" "$poet" import "$tmp/trained.onnx" --batch 2
refuse "ONNX: unsupported op" "node 'norm' (LpNormalization): this op is not supported" \
    "$poet" import "$onnx/unsupported_op.onnx"
refuse "ONNX: unsupported attribute" "node 'conv' (Conv): auto_pad is none of" "$poet" import "$onnx/bad_auto_pad.onnx"
ok "ONNX: auto_pad SAME_UPPER" "$poet" graph --onnx "$onnx/auto_pad.onnx" --batch 2 --device m4 --nodes "$tmp/same.json"
has "ONNX: SAME_UPPER, stride 2: ceil(8 / 2) outputs" '"shape":.\[2, 2, 4, 4\]' "$tmp/same.json"
refuse "ONNX: reflecting Pad" "node 'pad' (Pad): only padding with zeros" "$poet" import "$onnx/reflect_pad.onnx"
refuse "ONNX: Pad before a max pool" "node 'pool' (MaxPool): it reads a zero-padded tensor" \
    "$poet" import "$onnx/pad_max_pool.onnx"
refuse "ONNX: 6-d transpose" "node 'shuffle' (Transpose): a transpose of more than 4 dimensions that do not merge" \
    "$poet" import "$onnx/pixel_shuffle.onnx"
refuse "ONNX: dangling input" "input 'nowhere' is not computed before it" "$poet" import "$onnx/dangling.onnx"
refuse "ONNX: cycle" "node 'first' (Add): input 'b' is not computed before it" "$poet" import "$onnx/cycle.onnx"
refuse "ONNX: shapes" "node 'product' (MatMul): its weights do not fit" "$poet" import "$onnx/shape_mismatch.onnx"
ok "ONNX: nearest Resize, half_pixel with rounding" "$poet" import "$onnx/resize_half_pixel.onnx" --batch 2
has "ONNX: nearest Resize by 3 is an upsample2d" "upsample2d 1" "$tmp/out"
refuse "ONNX: nearest Resize that does not repeat" "node 'resize' (Resize): its coordinate transformation and nearest mode" \
    "$poet" import "$onnx/resize_asymmetric_round.onnx"
refuse "ONNX: linear Resize" "node 'resize' (Resize): only mode nearest" "$poet" import "$onnx/resize_linear.onnx"
ok "ONNX: a Softmax at the output" "$poet" import "$onnx/softmax_out.onnx" --batch 2
has "ONNX: the loss takes the output's Softmax over" "takes over its final Softmax" "$tmp/out"
has "ONNX: ... so no softmax node is left" "linear 1 softmax_ce 1$" "$tmp/out"
ok "ONNX: Mod in shape arithmetic" "$poet" graph --onnx "$onnx/mod_shape.onnx" --batch 2 --device m4 --nodes "$tmp/mod.json"
has "ONNX: -7 mod 5 is 3, the rows 6 long" '"shape":.\[4, 6\]' "$tmp/mod.json"
ok "ONNX: Mod with fmod 1" "$poet" graph --onnx "$onnx/fmod_shape.onnx" --batch 2 --device m4 --nodes "$tmp/fmod.json"
has "ONNX: -7 fmod 5 is -2, the rows 1 long" '"shape":.\[24, 1\]' "$tmp/fmod.json"
ok "ONNX: ReduceMean over the tokens" "$poet" graph --onnx "$onnx/token_mean.onnx" --batch 2 --device m4 --nodes "$tmp/mean.json"
has "ONNX: ... keeping their axis as 1" '"shape":.\[2, 1, 4\]' "$tmp/mean.json"
refuse "ONNX: tied weights" "initializer 'tied' is the weights of two nodes (tied weights)" \
    "$poet" import "$onnx/tied.onnx"
# a fuzz find: the Add after a MatMul, which the importer fuses into a linear layer, without an output
refuse "ONNX: a node without output" "node '/self_attn/Add' (Add): no output" \
    "$poet" import "$data/../fuzz/corpus/onnx-add-without-output.bin"
head -c 4000 "$onnx/digits_cnn.onnx" >"$tmp/truncated.onnx"
refuse "ONNX: truncated" "not an ONNX model" "$poet" import "$tmp/truncated.onnx"
refuse "ONNX: not ONNX" "not an ONNX model" "$poet" import "$data/reference/linear__m4.json"
refuse "ONNX: no such input" "no input named 'nothing'" "$poet" import "$onnx/digits_cnn.onnx" --input nothing
refuse "ONNX: no such output" "no output 'nothing'" "$poet" import "$onnx/digits_cnn.onnx" --output nothing
refuse "ONNX out without ONNX in" "--onnx-out needs --onnx" "$poet" train --model cnn_digits --device m4 --budget 100% \
    --onnx-out "$tmp/x.onnx"
refuse "ONNX train without data" "give --data" "$poet" train --onnx "$onnx/digits_cnn.onnx" --device m4 --budget 100%

# ---- partial updates ----
ok "update" "$poet" update --model mlp_digits_wide --rounds 3 --epochs 2 --k 0.02 --always-send --out "$tmp/upd" --json
for f in image.poet round-01.patch round-02.patch round-03.patch; do
    if [ -s "$tmp/upd/$f" ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: update wrote no $f"; fi
done
has "update JSON has patch_bytes" '"patch_bytes"' "$tmp/out"
refuse "update: k" "--k must be a share in (0, 1]" "$poet" update --model mlp_digits_wide --k 0
refuse "update: method" "--method must be full, dpu, gcpu, rpu or prune" "$poet" update --model mlp_digits_wide --method all
refuse "update: global share" "--global-share must be a share in" "$poet" update --model mlp_digits_wide \
    --global-share 1.5
refuse "update: global share of gcpu" "--global-share weighs dpu's metric" "$poet" update --model mlp_digits_wide \
    --method gcpu --global-share 1
refuse "update: too few examples" "training examples: 20 rounds from 200" "$poet" update --model mlp_digits_wide \
    --rounds 20 --epochs 1

# ---- partial training ----
num() { sed -n "s/.*\"$1\":[[:space:]]*\([0-9.e+-]*\).*/\1/p" "$2" | head -1; }
ok "graph --train all" "$poet" graph --model cnn_digits --device m4 --json
cp "$tmp/out" "$tmp/all.json"
ok "graph --train last:1" "$poet" graph --model cnn_digits --device m4 --train last:1 --json
has "graph json has persistent_bytes" '"persistent_bytes"' "$tmp/out"
if [ "$(num keep_all_peak_bytes "$tmp/out")" -lt "$(num keep_all_peak_bytes "$tmp/all.json")" ] &&
    [ "$(num persistent_bytes "$tmp/out")" -lt "$(num persistent_bytes "$tmp/all.json")" ]; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "FAIL: --train last:1 does not lower the keep-all peak and the persistent state"
fi
ok "graph nodes" "$poet" graph --model mlp_digits --device m4 --nodes "$tmp/nodes.json"
last=$(/usr/bin/python3 -c 'import json,sys; print([n["name"] for n in json.load(open(sys.argv[1])) if n.get("params")][-1])' "$tmp/nodes.json")
printf '# the classifier only\n%s all\n' "$last" >"$tmp/mask.txt"
ok "train --train mask:FILE" "$poet" train --model mlp_digits --device m4 --budget 100% --train "mask:$tmp/mask.txt" \
    --steps 20 --json
cp "$tmp/out" "$tmp/mask.json"
ok "train --train last:1" "$poet" train --model mlp_digits --device m4 --budget 100% --train last:1 --steps 20 --json
if [ "$(sha_of "$tmp/out")" = "$(sha_of "$tmp/mask.json")" ]; then passed=$((passed + 1)); else
    failed=$((failed + 1))
    echo "FAIL: a mask naming the last layer trains other weights than last:1"
fi
ok "train --train biases" "$poet" train --model mlp_digits --device m4 --budget 100% --train biases --steps 20 --json
if [ "$(sha_of "$tmp/out")" != "$(sha_of "$tmp/mask.json")" ]; then passed=$((passed + 1)); else
    failed=$((failed + 1))
    echo "FAIL: biases and last:1 train the same weights"
fi
ok "graph --train biases+masks" "$poet" graph --model cnn_digits --device m4 --train biases+masks --json
cp "$tmp/out" "$tmp/masks.json"
ok "graph --train biases" "$poet" graph --model cnn_digits --device m4 --train biases --json
if [ "$(num keep_all_peak_bytes "$tmp/masks.json")" -lt "$(num keep_all_peak_bytes "$tmp/out")" ]; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "FAIL: +masks does not lower the keep-all peak of --train biases"
fi
ok "train --train ratio:0.5" "$poet" train --model mlp_digits --device m4 --budget 100% --train ratio:0.5 --steps 20 \
    --json
cp "$tmp/out" "$tmp/ratio.json"
ok "train --train all" "$poet" train --model mlp_digits --device m4 --budget 100% --steps 20 --json
if [ -n "$(sha_of "$tmp/out")" ] && [ "$(sha_of "$tmp/out")" != "$(sha_of "$tmp/ratio.json")" ]; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "FAIL: ratio:0.5 and all train the same weights"
fi
for r in 0 1.5 -0.5 x ""; do
    refuse "train: ratio:$r" "the ratio must be a number in (0, 1]" "$poet" train --model mlp_digits --device m4 \
        --budget 100% --train "ratio:$r"
done
ok "ONNX in, ratio:0.5+masks, ONNX out" "$poet" train --onnx "$onnx/digits_cnn.onnx" --data digits --device m4 \
    --batch 16 --budget 100% --time-limit 2 --steps 10 --train ratio:0.5+masks --json --quiet \
    --onnx-out "$tmp/ratio.onnx"
ok "the model trained on half its channels reads back" "$poet" import "$tmp/ratio.onnx" --batch 2
refuse "train: bad spec" "expected all, biases, last:N" "$poet" train --model mlp_digits --device m4 --budget 100% \
    --train most
refuse "graph: too many layers" "has 2 layers with parameters" "$poet" graph --model mlp_digits --device m4 --train last:3
printf 'nowhere all\n' >"$tmp/badmask.txt"
refuse "plan: unknown node in mask" "line 1: no node 'nowhere'" "$poet" plan --model mlp_digits --device m4 \
    --budget 100% --train "mask:$tmp/badmask.txt"
refuse "plan: --train with --instance" "--train apply to --model and --onnx" "$poet" plan --instance "$tmp/g.json" \
    --budget 50% --train biases
refuse "update: --train" "chooses what each round trains" "$poet" update --model mlp_digits_wide --train biases
ok "ONNX --train last:2" "$poet" graph --onnx "$onnx/digits_cnn.onnx" --device m4 --train last:2 --json

# DRESS-style sparsity levels: one schedule, energy per level, row-sorted parameter bytes
ok "plan --sparse-levels" "$poet" plan --model mlp_digits_wide --device m4 --budget 75% --sparse-levels 0,50,75,90 --json
if /usr/bin/python3 - "$tmp/out" <<'PY'; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: --sparse-levels report"; fi
import json, sys
r = json.load(open(sys.argv[1]))
lv = r["sparse_levels"]
weights = 64 * 256 + 256 * 256 + 256 * 10  # the linear weights, a 16-bit column each beside the floats
assert [l["sparsity"] for l in lv] == [0, 0.5, 0.75, 0.9], lv
assert all(l["parameter_bytes"] == 4 * (weights + 256 + 256 + 10) + 2 * weights for l in lv), lv
assert abs(lv[0]["energy_j"] - r["energy_j"]) <= 1e-12 * r["energy_j"], (lv[0], r["energy_j"])
assert all(a["energy_j"] > b["energy_j"] for a, b in zip(lv, lv[1:])), lv
assert all(a["compute_time_s"] > b["compute_time_s"] for a, b in zip(lv, lv[1:])), lv
PY
refuse "plan: sparse levels not increasing" "--sparse-levels must be increasing" "$poet" plan --model mlp_digits \
    --device m4 --budget 100% --sparse-levels 50,40
refuse "plan: sparse level of 100%" "--sparse-levels must be increasing" "$poet" plan --model mlp_digits \
    --device m4 --budget 100% --sparse-levels 0,100
refuse "plan: sparse levels on an instance" "need the model's layers" "$poet" plan --instance "$tmp/g.json" \
    --budget 50% --sparse-levels 50
# multi-bit weights: the parameter bytes by hand, 1320 groups of 64 weights and 522 float biases
for bits in 2 0.5; do
    ok "plan --weight-bits $bits" "$poet" plan --model mlp_digits_wide --device m4 --budget 100% --weight-bits "$bits" --json
    want=$(/usr/bin/python3 -c "import sys; b = float(sys.argv[1]); print(int(1320 + b * 1320 * (4 + 8) + 4 * 522))" "$bits")
    if [ "$(num parameter_bytes "$tmp/out")" = "$want" ]; then passed=$((passed + 1)); else
        failed=$((failed + 1))
        echo "FAIL: --weight-bits $bits: parameter_bytes $(num parameter_bytes "$tmp/out"), by hand $want"
    fi
done
# a quantized backbone under partial training: the trained classifier (256 x 10) stays float
ok "plan --weight-bits with --train last:1" "$poet" plan --model mlp_digits_wide --device m4 --budget 100% \
    --weight-bits 1 --train last:1 --json
want=$((1280 + 1280 * (4 + 8) + 4 * 2560 + 4 * 522))
if [ "$(num parameter_bytes "$tmp/out")" = "$want" ]; then passed=$((passed + 1)); else
    failed=$((failed + 1))
    echo "FAIL: --weight-bits 1 --train last:1: parameter_bytes $(num parameter_bytes "$tmp/out"), by hand $want"
fi
# train, then compress: nested sparse levels and multi-bit weights, each measured
ok "train --compress dress" "$poet" train --model mlp_digits --device m4 --budget 100% --epochs 2 \
    --compress dress:0,50,90 --compress-epochs 1 --json --quiet
if /usr/bin/python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))["compress"]; l = c["levels"]
assert [x["sparsity"] for x in l] == [0, 0.5, 0.9] and all(0.2 < x["test_accuracy"] <= 1 for x in l), c' "$tmp/out"; then
    passed=$((passed + 1))
else
    failed=$((failed + 1)); echo "FAIL: --compress dress report: $(head -c 300 "$tmp/out")"
fi
ok "train --compress alq" "$poet" train --model mlp_digits --device m4 --budget 100% --epochs 2 --compress alq:0.75 \
    --compress-epochs 3 --json --quiet
if /usr/bin/python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))["compress"]
assert c["method"] == "alq" and abs(c["bits"] - 0.75) < 0.02 and c["bits"] <= 0.75 and c["test_accuracy"] > 0.2, c' "$tmp/out"; then
    passed=$((passed + 1))
else
    failed=$((failed + 1)); echo "FAIL: --compress alq report: $(head -c 300 "$tmp/out")"
fi
refuse "train: bad --compress" "--compress must be dress:LIST" "$poet" train --model mlp_digits --device m4 \
    --budget 100% --compress alq:9
refuse "train: --compress-epochs alone" "--compress-epochs needs --compress" "$poet" train --model mlp_digits \
    --device m4 --budget 100% --compress-epochs 2
refuse "plan: too many bits" "--weight-bits must be more than 0" "$poet" plan --model mlp_digits --device m4 \
    --budget 100% --weight-bits 7
refuse "plan: bits on an instance" "need the model's layers" "$poet" plan --instance "$tmp/g.json" --budget 50% \
    --weight-bits 1

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
