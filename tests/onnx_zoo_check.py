"""torchvision's ResNet-18, exported by torch.onnx.export and imported by
poet, against the zoo's resnet18_torchvision: every forward node the same
op, shape, bytes, FLOPs and parameters (docs/graph.md says how the zoo's
POET-style resnet18 differs). Needs python3-torchvision.

usage: onnx_zoo_check.py POET WORKDIR"""
import json
import os
import subprocess
import sys

import torch
import torchvision


def nodes(poet, source, path):
    run = subprocess.run([poet, "graph", *source, "--device", "m4", "--batch", "2", "--nodes", path],
                         capture_output=True, text=True)
    if run.returncode:
        raise SystemExit(f"poet graph {' '.join(source)} failed: {run.stderr.strip()}")
    return json.load(open(path))


def main():
    poet, workdir = sys.argv[1], sys.argv[2]
    model = torchvision.models.resnet18().eval()
    onnx_path = os.path.join(workdir, "resnet18.onnx")
    torch.onnx.export(model, torch.zeros(1, 3, 224, 224), onnx_path, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}}, opset_version=14, training=torch.onnx.TrainingMode.PRESERVE,
                      do_constant_folding=False)
    imported = nodes(poet, ["--onnx", onnx_path], os.path.join(workdir, "imported.json"))
    zoo = nodes(poet, ["--model", "resnet18_torchvision"], os.path.join(workdir, "zoo.json"))
    keys = ("op", "shape", "bytes", "flops", "params")
    differ = [(k, a, b) for k, (a, b) in enumerate(zip(imported, zoo)) if any(a[f] != b[f] for f in keys)]
    params = sum(n["params"] for n in imported)
    torch_params = sum(p.numel() for p in model.parameters())
    print(f"resnet18 from torchvision: {len(imported)} forward nodes imported, {len(zoo)} in the zoo, "
          f"{len(differ)} differ; {params} parameters (PyTorch: {torch_params})")
    for k, a, b in differ[:5]:
        print(f"  FAILED: node {k}: imported {[a[f] for f in keys]}, zoo {[b[f] for f in keys]}")
    ok = not differ and len(imported) == len(zoo) and params == torch_params
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    sys.exit(0 if ok else 1)


main()
