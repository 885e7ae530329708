"""Redoes with PyTorch the training step that tests/torch_dump.c ran in poet
and compares the loss, every parameter gradient and the batch-norm running
statistics. PyTorch computes in float64 from the same float32 inputs, so the
difference is poet's float32 rounding alone.

Tolerance: |poet - torch| <= ATOL + RTOL * |torch|, elementwise.
Prints one line per graph and "N passed, N failed" at the end."""
import json
import math
import sys

import torch
import torch.nn.functional as F

ATOL, RTOL = 1e-5, 1e-3
MASK64 = (1 << 64) - 1


def mix64(z):
    z = (z + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def dropout_scale(seed, step, node, n, p):
    """poet's dropout mask (src/device/elementwise.c), rebuilt from its definition."""
    s = mix64(seed ^ mix64((step + 0x5EED) & MASK64))
    base = s ^ mix64(node)
    out = []
    for i in range(n):
        h = mix64(base ^ ((i * 0xD1B54A32D192ED03) & MASK64))
        u = (h >> 40) / 16777216.0
        out.append(0.0 if u < p else 1.0 / (1.0 - p))
    return torch.tensor(out, dtype=torch.float64)


def heads(t, b, s, h):
    return t.reshape(b, s, h, -1).permute(0, 2, 1, 3)


FLAG = {"no_bias": 1, "count_pad": 2, "param": 4, "const": 8, "left": 16, "keepdims": 32, "no_affine": 64,
        "gelu_erf": 128, "freeze_weights": 256, "freeze_bias": 512, "bn_eval": 1024}


def has(n, flag):
    return bool(n["flags"] & FLAG[flag])


def padded(x, n, value):
    return F.pad(x, (n["pl"], n["pr"], n["pt"], n["pb"]), value=value)


def conv2d(x, n, w):
    f, g, kh, kw = n["features"], n["groups"], n["kh"], n["kw"]
    count = f * (x.shape[1] // g) * kh * kw
    bias = None if has(n, "no_bias") else w[count:]
    return F.conv2d(padded(x, n, 0.0), w[:count].reshape(f, x.shape[1] // g, kh, kw), bias, (n["sh"], n["sw"]), 0,
                    (n["dh"], n["dw"]), g)


def avgpool2d(x, n):
    k, s = (n["kh"], n["kw"]), (n["sh"], n["sw"])
    total = F.avg_pool2d(padded(x, n, 0.0), k, s) * (k[0] * k[1])
    if has(n, "count_pad"):
        return total / (k[0] * k[1])
    ones = padded(torch.ones_like(x), n, 0.0)
    return total / (F.avg_pool2d(ones, k, s) * (k[0] * k[1]))


def binary(op, n, ins, operand):
    if len(ins) == 2:
        a, b = ins
    elif has(n, "left"):
        a, b = operand.reshape(n["dims"]), ins[0]
    else:
        a, b = ins[0], operand.reshape(n["dims"])
    return {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[op](a, b)


def forward(g, params, running):
    nodes, vals, new_running = g["nodes"], [], {}
    for v, n in enumerate(nodes):
        op, ins = n["op"], [vals[i] for i in n["inputs"]]
        w = params.get(str(v))
        # a window over [N, C, L] is one over [N, C, 1, L]
        flat = op in ("conv2d", "maxpool2d", "avgpool2d", "global_avgpool") and ins[0].dim() == 3
        if flat:
            ins = [ins[0].unsqueeze(2)]
        if op == "input":
            y = torch.tensor(g["x"], dtype=torch.float64).reshape(n["shape"])
        elif op == "conv2d":
            y = conv2d(ins[0], n, w)
        elif op == "batchnorm2d":
            c = ins[0].shape[1]
            rm = torch.tensor(running[str(v)][:c], dtype=torch.float64)
            rv = torch.tensor(running[str(v)][c:], dtype=torch.float64)
            y = F.batch_norm(ins[0], rm, rv, w[:c], w[c:], training=not has(n, "bn_eval"), momentum=n["momentum"],
                             eps=n["eps"])
            new_running[str(v)] = torch.cat([rm, rv])
        elif op == "relu":
            y = F.relu(ins[0])
        elif op == "maxpool2d":
            y = F.max_pool2d(padded(ins[0], n, -math.inf), (n["kh"], n["kw"]), (n["sh"], n["sw"]))
        elif op == "avgpool2d":
            y = avgpool2d(ins[0], n)
        elif op == "global_avgpool":
            y = ins[0].mean(dim=(2, 3), keepdim=has(n, "keepdims"))
        elif op == "add" and len(ins) == 2 and ins[1].shape != ins[0].shape and ins[1].dim() == 4 \
                and ins[1].shape[1] < ins[0].shape[1]:
            y = ins[0] + F.pad(ins[1], (0, 0, 0, 0, 0, ins[0].shape[1] - ins[1].shape[1]))
        elif op in ("add", "sub", "mul", "div"):
            operand = w if has(n, "param") else torch.tensor(running.get(str(v), []), dtype=torch.float64)
            y = binary(op, n, ins, operand)
        elif op in ("flatten",):
            y = ins[0].reshape(ins[0].shape[0], -1)
        elif op == "reshape":
            y = ins[0].reshape(n["dims"])
        elif op == "linear":
            fo, fi = n["features"], ins[0].shape[-1]
            y = F.linear(ins[0], w[: fo * fi].reshape(fo, fi), None if has(n, "no_bias") else w[fo * fi:])
        elif op == "dropout":
            mask = dropout_scale(g["seed"], 0, n["inputs"][0], ins[0].numel(), n["p"])
            y = ins[0] * mask.reshape(ins[0].shape)
        elif op == "softmax_ce":
            y = F.cross_entropy(ins[0], torch.tensor(g["labels"]))
        elif op == "layernorm":
            d = ins[0].shape[-1]
            affine = not has(n, "no_affine")
            y = F.layer_norm(ins[0], (d,), w[:d] if affine else None, w[d:] if affine else None, eps=n["eps"])
        elif op == "gelu":
            y = F.gelu(ins[0], approximate="none" if has(n, "gelu_erf") else "tanh")
        elif op == "softmax":
            y = torch.softmax(ins[0], dim=n["axis"])
        elif op == "attn_scores":
            q, k = ins
            b, h, s = q.shape[0] // n["seq"], n["heads"], n["seq"]
            qh, kh = heads(q, b, s, h), heads(k, b, s, h)
            y = qh @ kh.transpose(-1, -2) / math.sqrt(qh.shape[-1])
        elif op == "attn_context":
            p, vv = ins
            b, h, s = vv.shape[0] // n["seq"], n["heads"], n["seq"]
            y = (p @ heads(vv, b, s, h)).permute(0, 2, 1, 3).reshape(vv.shape)
        elif op == "matmul":
            y = torch.matmul(ins[0], ins[1])
        elif op == "sigmoid":
            y = torch.sigmoid(ins[0])
        elif op == "tanh":
            y = torch.tanh(ins[0])
        elif op == "erf":
            y = torch.erf(ins[0])
        elif op == "hardsigmoid":
            y = torch.clamp(n["alpha"] * ins[0] + n["beta"], 0.0, 1.0)
        elif op == "hardswish":
            y = F.hardswish(ins[0])
        elif op == "leaky_relu":
            y = F.leaky_relu(ins[0], n["alpha"])
        elif op == "softplus":
            y = F.softplus(ins[0])
        elif op == "elu":
            y = F.elu(ins[0], n["alpha"])
        elif op == "prelu":
            y = torch.where(ins[0] > 0, ins[0], w.reshape(n["dims"]) * ins[0])
        elif op == "clip":
            y = F.hardtanh(ins[0], n["alpha"], n["beta"])
        elif op == "transpose":
            y = ins[0].permute(n["perm"][: ins[0].dim()])
        elif op == "concat":
            if has(n, "param"):  # broadcast over the axes before the concat's
                shape = list(ins[0].shape)
                shape[n["axis"]] = n["dims"][n["axis"]]
                operand = w.reshape(n["dims"]).expand(shape)
                ins = [operand, ins[0]] if has(n, "left") else [ins[0], operand]
            y = torch.cat(ins, dim=n["axis"])
        elif op == "upsample2d":
            y = ins[0].repeat_interleave(n["sh"], dim=2).repeat_interleave(n["sw"], dim=3)
        elif op == "slice":
            y = ins[0].narrow(n["axis"], n["start"], n["end"] - n["start"])
        else:
            raise SystemExit(f"torch_check: no PyTorch rendering of op {op}")
        vals.append(y.squeeze(2) if flat and y.dim() == 4 else y)
    return vals[-1], new_running


def as_float64(v):
    """A copy of v as a flat float64 tensor, out of any autograd graph."""
    return v.detach().to(torch.float64).reshape(-1) if torch.is_tensor(v) else torch.tensor(v, dtype=torch.float64).reshape(-1)


def close(poet, ref):
    """Whether poet's values (a list, an array or a tensor) are within
    ATOL + RTOL |ref| of ref's, and the largest absolute difference."""
    poet, ref = as_float64(poet), as_float64(ref)
    err = (poet - ref).abs()
    worst = float((err - RTOL * ref.abs()).max()) if err.numel() else 0.0
    return worst <= ATOL, float(err.max()) if err.numel() else 0.0


def trained_part(n, grad):
    """Of a node's parameter gradient, the tensors that train, in poet's
    order: the weights (gamma, the operand), then the bias (beta)."""
    if n["op"] in ("conv2d", "linear") and not has(n, "no_bias"):
        bias = n["features"]
    elif n["op"] in ("batchnorm2d", "layernorm"):
        bias = grad.numel() // 2
    else:
        bias = 0
    w, b = grad.reshape(-1)[:grad.numel() - bias], grad.reshape(-1)[grad.numel() - bias:]
    return torch.cat(([] if has(n, "freeze_weights") else [w]) + ([] if has(n, "freeze_bias") else [b]))


def check(g):
    params = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in g["params"].items()}
    loss, new_running = forward(g, params, g["running"])
    loss.backward()
    failures, worst = [], 0.0
    ok, e = close([g["loss"]], loss)
    worst = max(worst, e)
    if not ok:
        failures.append(f"loss {g['loss']} vs {float(loss)}")
    for k, p in params.items():
        if k not in g["grads"]:
            continue  # frozen
        ok, e = close(g["grads"][k], trained_part(g["nodes"][int(k)], p.grad))
        worst = max(worst, e)
        if not ok:
            failures.append(f"gradient of node {k} ({g['nodes'][int(k)]['op']}), max error {e:.3g}")
    for k, r in new_running.items():
        ok, e = close(g["running_after"][k], r)
        worst = max(worst, e)
        if not ok:
            failures.append(f"running statistics of node {k}, max error {e:.3g}")
    print(f"{g['name']}: loss {g['loss']:.6f} (torch {float(loss):.6f}), {len(params)} parameter tensors, "
          f"largest absolute difference {worst:.3g}")
    for f in failures:
        print(f"  FAILED: {f}")
    return not failures


def main():
    torch.set_num_threads(1)
    with open(sys.argv[1]) as f:
        graphs = json.load(f)
    results = [check(g) for g in graphs]
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
