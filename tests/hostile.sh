#!/usr/bin/env bash
# Hostile files and unlucky paths, at the command line (the binary formats'
# fields at boundary values are tests/test_boundaries.c's): inputs that are
# not regular files, crafted checkpoints and schedules, sizes past the
# limits, outputs over what must not be replaced, two runs on one
# directory, temporary storage, and the smaller promises of README's "Bad
# input and failures". Each check failed before these rules existed.
set -u
poet=$1
data=$2
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
py=/usr/bin/python3
. "$(dirname "$0")/testlib.sh"

# Sets the little-endian field of WIDTH bytes at OFFSET of FILE to VALUE and
# makes its trailing CRC-32 right (every binary format of poet ends so).
set_field() { # set_field FILE OFFSET WIDTH VALUE
    $py - "$@" <<'EOF'
import struct, sys, zlib
path, at, width, value = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
b = bytearray(open(path, 'rb').read())
b[at:at + width] = (value % (1 << (8 * width))).to_bytes(width, 'little')
b[-4:] = struct.pack('<I', zlib.crc32(bytes(b[:-4])))
open(path, 'wb').write(b)
EOF
}

train=(--model cnn_digits --device m4 --batch 8 --budget 42% --runtime-factor 1.2 --planner hybrid --quiet)

# ---- inputs ----
mkfifo "$tmp/fifo"
refuse "a FIFO as a graph file does not hang" "not a regular file but a FIFO" "$poet" graph --instance "$tmp/fifo"
refuse "a FIFO as a schedule" "FIFO" "$poet" simulate "$tmp/fifo"
ln -s "$tmp/fifo" "$tmp/fifo.json"
refuse "a FIFO as a device profile" "FIFO" "$poet" graph --model linear --device "$tmp/fifo.json"
mkdir -p "$tmp/fifo-data"
mkfifo "$tmp/fifo-data/digits.csv.gz"
refuse "a FIFO as a data set" "FIFO" "$poet" train "${train[@]}" --steps 1 --data-dir "$tmp/fifo-data"
refuse "a directory as an ONNX model" "not a regular file but a directory" "$poet" import "$tmp"

# a binary schedule of a million holds: refused at the second, not after half a minute of setting stages
$py - "$tmp/holds.bin" <<'EOF'
import struct, sys, zlib
def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7f | 0x80); v >>= 7
    out.append(v)
    return bytes(out)
T = 8192
b = bytearray(struct.pack('<I', 0x50530001)) + varint(T) + varint(1000) + struct.pack('<d', 1.5) + struct.pack('<I', 0)
b += varint(0) + varint(0) + varint(0) + varint(0)
b += varint(10 ** 6) + (varint(0) + varint(0) + varint(T - 2)) * 10 ** 6  # tensor 0 held over every stage, a million times
b += struct.pack('<I', zlib.crc32(bytes(b)))
open(sys.argv[1], 'wb').write(b)
EOF
refuse "a million overlapping holds" "overlaps another hold" "$poet" decode "$tmp/holds.bin" --out "$tmp/holds.json"
# more values than a JSON document may hold: refused before cJSON builds them (not after gigabytes)
$py -c 'import sys; open(sys.argv[1], "w").write("{\"edges\": [" + "0," * 9000000 + "0]}")' "$tmp/huge.json"
refuse "a graph of 9 million values" "more than 8388608 values" "$poet" graph --instance "$tmp/huge.json"

# a device profile whose costs overflow, and one whose name is an escape sequence
cat >"$tmp/slow.json" <<'EOF'
{"format":"poet-device","version":1,"name":"slow","flops_per_s":1e-300,"flops_per_j":1e9,"pagein_latency_s":1e-4,
 "pagein_bytes_per_s":4e6,"pageout_latency_s":1e-4,"pageout_bytes_per_s":4e6,"memory_power_w":0.3}
EOF
refuse "a profile whose costs overflow" "flops_per_s = 1e-300 is outside" "$poet" plan --model cnn_digits \
    --device "$tmp/slow.json" --budget 60%
sed 's/1e-300/1e-3/' "$tmp/slow.json" >"$tmp/slow2.json"
$py -c 'import json, sys; g = json.load(open(sys.argv[1]))
for n in g["nodes"]: n["cpu_cost_ms"] = 1e299
json.dump(g, open(sys.argv[2], "w"))' "$data/reference/linear__m4.json" "$tmp/costly.json"
refuse "a graph whose costs add up to infinity" "an iteration's costs add up to" "$poet" plan \
    --instance "$tmp/costly.json" --budget 60%
sed 's/"name":"slow"/"name":"\\u001b[31mred"/' "$tmp/slow2.json" >"$tmp/escape.json"
refuse "a name with an escape sequence" "holds a control character" "$poet" graph --model linear \
    --device "$tmp/escape.json"
sed 's/"name":"slow"/"\\u001b[2J":1,"name":"slow"/' "$tmp/slow2.json" >"$tmp/escape-key.json"
"$poet" graph --model linear --device "$tmp/escape-key.json" >/dev/null 2>"$tmp/err"
expect "an unknown key's escape sequence is not printed" '[ "$(tr -d -c '\''\033'\'' <"$tmp/err" | wc -c)" = 0 ]'
sed 's/"name":"slow"/"name":"sl\\u0000ow"/' "$tmp/slow2.json" >"$tmp/nul.json"
refuse "a NUL inside a JSON string" "NUL character" "$poet" graph --model linear --device "$tmp/nul.json"

# data rows with an extra column or trailing junk
mkdir -p "$tmp/digits"
for edit in 's/$/,3/' 's/$/x/' 's/^/ /'; do
    zcat /usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz | sed "7$edit" | gzip >"$tmp/digits/digits.csv.gz"
    refuse "a digits row changed by $edit" "row 7: expected 64 values" "$poet" train "${train[@]}" --steps 1 \
        --data-dir "$tmp/digits"
done

# ONNX attributes wider than poet keeps them: refused, not wrapped
if $py -c 'import onnx' 2>/dev/null; then
    for attr in "pads=2**40" "dilations=0" "group=0" "strides=2**32+1" "kernel_shape=2**32+3"; do
        $py - "$tmp/attr.onnx" "$attr" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto
name, value = sys.argv[2].split('=')
value = eval(value)
attrs = {'kernel_shape': [3, 3], 'pads': [1, 1, 1, 1], 'strides': [1, 1], 'dilations': [1, 1], 'group': 1}
attrs[name] = value if name == 'group' else [value] * len(attrs[name])
w = numpy_helper.from_array(np.zeros((4, 1, 3, 3), np.float32), 'w')
conv = helper.make_node('Conv', ['x', 'w'], ['y'], **attrs)
flat = helper.make_node('Flatten', ['y'], ['z'])
g = helper.make_graph([conv, flat], 'g', [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 1, 8, 8])],
                      [helper.make_tensor_value_info('z', TensorProto.FLOAT, None)], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), sys.argv[1])
EOF
        refuse "ONNX conv $attr" "outside" "$poet" import "$tmp/attr.onnx"
    done
    $py - "$data/onnx/digits_cnn.onnx" "$tmp/escape.onnx" <<'EOF'
import sys
import onnx
m = onnx.load(sys.argv[1])
m.graph.node[0].name = "\x1b[2Jconv"
onnx.save(m, sys.argv[2])
EOF
    refuse "an ONNX name with an escape sequence" "holds a control character" "$poet" import "$tmp/escape.onnx"
else
    echo "hostile: python3-onnx is missing; the ONNX attribute checks are skipped"
fi

# ---- data files (--data FILE: docs/data.md) ----
$py - "$tmp" <<'EOF'
import struct, sys, zlib
import numpy as np
d = sys.argv[1]
x, y = np.zeros((40, 1, 8, 8), np.float32), np.arange(40) % 10
np.save(f"{d}/y.npy", y)
np.save(f"{d}/x.npy", x)
raw = open(f"{d}/x.npy", "rb").read()
open(f"{d}/short.npy", "wb").write(raw[:-7])
open(f"{d}/long.npy", "wb").write(raw + b"\0" * 8)
open(f"{d}/header.npy", "wb").write(raw[:8] + struct.pack("<H", 60000) + raw[10:])
def reshaped(shape):  # the header padded to its old length, so only the shape changes
    old = b"(40, 1, 8, 8)"
    return raw.replace(old + b", }" + b" " * (len(shape) - len(old)), shape + b", }")
open(f"{d}/wrap.npy", "wb").write(reshaped(b"(2305843009213693952, 1, 1, 2)"))  # 2^62 floats: 2^64 bytes
open(f"{d}/count.npy", "wb").write(reshaped(b"(4611686018427387904, 8, 8)"))  # 2^68 elements
np.save(f"{d}/strings.npy", np.array(["a", "b"]))
np.save(f"{d}/fortran.npy", np.asfortranarray(np.zeros((40, 64), np.float32)))
nan = x.copy(); nan[3, 0, 2, 2] = np.inf
np.save(f"{d}/inf.npy", nan)
np.save(f"{d}/fy.npy", y.astype(np.float32))
np.save(f"{d}/y11.npy", np.full(40, 11))
np.savez(f"{d}/ok.npz", x=x, y=y)
z = bytearray(open(f"{d}/ok.npz", "rb").read())
at = z.rfind(b"PK\x01\x02")           # the last entry of the central directory: y.npy
z2 = bytearray(z); z2[at + 16:at + 20] = struct.pack("<I", 12345)  # its CRC-32
open(f"{d}/crc.npz", "wb").write(z2)
z3 = bytearray(z); z3[at + 42:at + 46] = struct.pack("<I", 0x7ffffff0)  # its local header, beyond the file
open(f"{d}/beyond.npz", "wb").write(z3)
z4 = bytearray(z); z4[at + 24:at + 28] = struct.pack("<I", 0xfffffff0)  # y.npy unpacks to 4 GiB, it says
open(f"{d}/bomb.npz", "wb").write(z4)
z5 = bytearray(z); z5[-22 + 10:-22 + 12] = struct.pack("<H", 60000)  # more entries than the directory holds
open(f"{d}/entries.npz", "wb").write(z5)
open(f"{d}/trunc.npz", "wb").write(bytes(z[:len(z) // 2]))
EOF
dtrain=("$poet" train --model cnn_digits --device m4 --batch 8 --budget 100% --steps 1 --quiet)
refuse "a truncated .npy" "truncated" "${dtrain[@]}" --data "$tmp/short.npy" --labels "$tmp/y.npy"
refuse "an .npy with bytes after its array" "bytes after its array" "${dtrain[@]}" --data "$tmp/long.npy" \
    --labels "$tmp/y.npy"
refuse "an .npy header beyond the file" "header of 60000 bytes" "${dtrain[@]}" --data "$tmp/header.npy" \
    --labels "$tmp/y.npy"
refuse "an .npy whose shape wraps 64 bits" "needs more bytes than it holds" "${dtrain[@]}" --data "$tmp/wrap.npy" \
    --labels "$tmp/y.npy"
refuse "an .npy of more than 2^64 elements" "malformed .npy header" "${dtrain[@]}" --data "$tmp/count.npy" \
    --labels "$tmp/y.npy"
refuse "strings as inputs" "dtype '<U1'" "${dtrain[@]}" --data "$tmp/strings.npy" --labels "$tmp/y.npy"
refuse "Fortran order" "Fortran order" "${dtrain[@]}" --data "$tmp/fortran.npy" --labels "$tmp/y.npy"
refuse "an infinite input" "example 3 holds inf" "${dtrain[@]}" --data "$tmp/inf.npy" --labels "$tmp/y.npy"
refuse "float labels" "are floats" "${dtrain[@]}" --data "$tmp/x.npy" --labels "$tmp/fy.npy"
refuse "labels past the model's classes" "labels up to 11; model 'cnn_digits' has 10 classes" "${dtrain[@]}" \
    --data "$tmp/x.npy" --labels "$tmp/y11.npy"
refuse "an .npz entry with a wrong CRC-32" "CRC-32 does not match" "${dtrain[@]}" --data "$tmp/crc.npz"
refuse "an .npz entry beyond the file" "lies beyond the file" "${dtrain[@]}" --data "$tmp/beyond.npz"
refuse "an .npz directory of more entries than it holds" "malformed zip directory" "${dtrain[@]}" \
    --data "$tmp/entries.npz"
refuse "half an .npz" "not a NumPy .npz" "${dtrain[@]}" --data "$tmp/trunc.npz"
refuse "an .npz entry that claims 4 GiB unpacked" "bytes unpacked, over poet's" "${dtrain[@]}" --data "$tmp/bomb.npz"
mkfifo "$tmp/data.npy"
refuse "a FIFO as a data file" "FIFO" "${dtrain[@]}" --data "$tmp/data.npy" --labels "$tmp/y.npy"
refuse "a data file that is not there" "no such file" "${dtrain[@]}" --data "$tmp/none.npz"

# ---- checkpoints against the run they resume ----
ok "train to checkpoint" "$poet" train "${train[@]}" --steps 30 --checkpoint-every 10 --checkpoint "$tmp/ck"
cp "$tmp/ck/checkpoint.poet" "$tmp/good.poet"
# offset, width, value and the refusal: batch_in_epoch, epoch, step (which the state's own count must equal)
for field in "40 8 9999:never reaches" "40 8 $((2 ** 40)):never reaches" "32 8 $((2 ** 63 - 1)):never reaches" \
    "24 8 $((2 ** 63 - 1)):inconsistent"; do
    cp "$tmp/good.poet" "$tmp/ck/checkpoint.poet"
    set_field "$tmp/ck/checkpoint.poet" ${field%%:*}
    refuse "a checkpoint's position changed (${field%%:*})" "${field#*:}" "$poet" train "${train[@]}" --steps 40 \
        --checkpoint "$tmp/ck" --resume
done
cp "$tmp/good.poet" "$tmp/ck/checkpoint.poet"
refuse "an SGD checkpoint resumed under Adam" "optimizer sgd, not adam" "$poet" train "${train[@]}" --steps 40 \
    --checkpoint "$tmp/ck" --resume --optimizer adam
refuse "resumed with another learning rate" "lr 0.05, not 0.01" "$poet" train "${train[@]}" --steps 40 \
    --checkpoint "$tmp/ck" --resume --lr 0.01
refuse "a checkpoint without --resume is not overwritten" "--resume continues it" "$poet" train "${train[@]}" \
    --steps 5 --checkpoint "$tmp/ck"
expect "... and stays as it was" 'cmp -s "$tmp/good.poet" "$tmp/ck/checkpoint.poet"'
ok "--overwrite starts afresh" "$poet" train "${train[@]}" --steps 5 --checkpoint "$tmp/ck" --overwrite --json
expect "... from step 0" 'grep -q '\''"resumed_at_step":[[:space:]]*0'\'' "$tmp/out"'
refuse "--resume with a mistyped directory" "no checkpoint directory" "$poet" train "${train[@]}" --steps 5 \
    --checkpoint "$tmp/ck-typo" --resume
expect "... which is not created" '[ ! -e "$tmp/ck-typo" ]'
mkdir "$tmp/ck-empty"
refuse "--resume where no checkpoint was written" "holds no checkpoint to resume" "$poet" train "${train[@]}" \
    --steps 5 --checkpoint "$tmp/ck-empty" --resume
# progress counts the run's steps, and a pipe gets lines too
"$poet" train "${train[@]:0:${#train[@]}-1}" --steps 30 >/dev/null 2>"$tmp/progress.err"
expect "piped progress counts the run's steps, to 30/30 (100%)" 'grep -q "step 30/30 (100%)" "$tmp/progress.err"'
"$poet" train "${train[@]}" --steps 30 >/dev/null 2>"$tmp/progress.err"
expect "... and --quiet silences it" '[ ! -s "$tmp/progress.err" ]'

# ---- two runs on one directory ----
"$poet" train "${train[@]}" --steps 100000 --checkpoint "$tmp/busy" >/dev/null 2>&1 &
holder=$!
for _ in $(seq 1 500); do [ -s "$tmp/busy/lock" ] && break; sleep 0.02; done
refuse "a second run on a directory in use" "in use by poet process $holder" "$poet" train "${train[@]}" --steps 5 \
    --checkpoint "$tmp/busy" --overwrite
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null

# ---- storage ----
mkdir -p "$tmp/tmpdir"
ln -s "$tmp/victim" "$tmp/tmpdir/poet-storage-1.bin"
echo "precious" >"$tmp/victim"
ok "paging with temporary storage" env TMPDIR="$tmp/tmpdir" "$poet" train "${train[@]}" --steps 3 --json
expect "... which pages" 'grep -q '\''"paged_bytes":[[:space:]]*[1-9]'\'' "$tmp/out"'
expect "... and leaves nothing in TMPDIR and no planted link followed" \
    '[ "$(ls "$tmp/tmpdir")" = "poet-storage-1.bin" ] && [ "$(cat "$tmp/victim")" = precious ]'
refuse "someone's file as --storage" "not poet's storage" "$poet" train "${train[@]}" --steps 3 --storage "$tmp/victim"
expect "... is left as it was" '[ "$(cat "$tmp/victim")" = precious ]'
ok "--storage where nothing pages" "$poet" train --model cnn_digits --device m4 --budget 100% --steps 2 --quiet \
    --storage "$tmp/victim"
expect "... does not touch the file" '[ "$(cat "$tmp/victim")" = precious ]'
ok "a storage file of poet's own" "$poet" train "${train[@]}" --steps 3 --storage "$tmp/flash.bin"
ok "... is reused by the next run" "$poet" train "${train[@]}" --steps 3 --storage "$tmp/flash.bin"

# ---- outputs ----
refuse "a FIFO as --out is not replaced" "a FIFO, which poet does not replace" "$poet" graph --model linear --device m4 \
    --out "$tmp/fifo"
expect "... and stays a FIFO" '[ -p "$tmp/fifo" ]'
# a device node of the test's own (never the system's: a poet that replaced it would break the machine)
if mknod "$tmp/null" c 1 3 2>/dev/null; then
    refuse "a device as --out" "a device, which poet does not replace" "$poet" plan --model linear --device m4 \
        --budget 100% --out "$tmp/null"
    expect "... and stays a device" '[ -c "$tmp/null" ]'
else
    echo "hostile: not root; the device-node check is skipped"
fi
refuse "a directory as --out" "a directory" "$poet" encode "$tmp/none.json" --out "$tmp"
echo '{}' >"$tmp/real.json"
ln -s real.json "$tmp/link.json"
ok "an output through a symbolic link" "$poet" graph --model linear --device m4 --out "$tmp/link.json"
expect "... keeps the link and writes its target" '[ -L "$tmp/link.json" ] && grep -q '\''"nodes"'\'' "$tmp/real.json"'
ln -s "$tmp/sub/new.json" "$tmp/dangling.json"
refuse "a link into a missing directory" "does not exist" "$poet" graph --model linear --device m4 \
    --out "$tmp/dangling.json"
refuse "a bad --onnx-out is found before training" "directory '$tmp/nodir' does not exist" "$poet" train \
    --onnx "$data/onnx/digits_cnn.onnx" --data digits --device m4 --budget 100% --epochs 50 --quiet \
    --onnx-out "$tmp/nodir/out.onnx"
refuse "--write-mps into a missing directory" "does not exist" "$poet" plan --instance "$data/reference/linear__m4.json" \
    --budget 60% --planner milp --quiet --write-mps "$tmp/nodir/model"
(
    ulimit -f 4
    "$poet" graph --model resnet18_cifar --device m4 --out "$tmp/big.json" >/dev/null 2>"$tmp/err"
    echo $? >"$tmp/rc"
)
expect "past ulimit -f: an error, not SIGXFSZ" '[ "$(cat "$tmp/rc")" = 1 ] && grep -q "File too large" "$tmp/err"'
expect "... and no file, not even a temporary one" '[ -z "$(ls "$tmp" | grep '\''^big\.json'\'')" ]'

# poet update: an earlier run's patches are not left beside a new run's
ok "update, three rounds" "$poet" update --model mlp_digits_wide --rounds 3 --epochs 1 --k 0.05 --always-send \
    --out "$tmp/upd"
refuse "update into a directory with an earlier run" "earlier run's" "$poet" update --model mlp_digits_wide \
    --rounds 2 --epochs 1 --out "$tmp/upd"
ok "update --overwrite" "$poet" update --model mlp_digits_wide --rounds 2 --epochs 1 --k 0.05 --always-send \
    --out "$tmp/upd" --overwrite
expect "... removes the earlier run's third round" '[ -e "$tmp/upd/round-02.patch" ] && [ ! -e "$tmp/upd/round-03.patch" ]'

# ---- numbers ----
refuse "--seed ' -1'" "--seed must be an integer" "$poet" train "${train[@]}" --seed " -1"
refuse "--seed 2^64" "--seed must be an integer" "$poet" export --model cnn_digits --device m4 --budget 100% \
    --seed 18446744073709551616 --out "$tmp/x.img"
refuse "--lr 1e-50" "--lr must be from" "$poet" train "${train[@]}" --lr 1e-50
refuse "--train last:2^32+1" "the model has 9 layers" "$poet" graph --model cnn_digits --device m4 \
    --train last:4294967297
refuse "--time-limit past a day" "--time-limit must be seconds in (0, 86400]" "$poet" train "${train[@]}" \
    --time-limit 1e6
refuse "--budget ' 5'" "--budget must be" "$poet" plan --model linear --device m4 --budget " 5"

echo "hostile: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
