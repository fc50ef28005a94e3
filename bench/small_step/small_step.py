# The small GPT training step of bench/small_step/model.ts, op for op, in PyTorch eager
# (run with Debian's /usr/bin/python3: python3-torch 1.13 on OpenBLAS). It reads the weights and
# batches model.ts wrote (writeData) from DIR, then serves commands on stdin so the TS runner can
# interleave it with the torchts modes:
#   "run K"  -> K more steps; prints one JSON line {"times": [ms...], "losses": [...]}
#   "quit"   -> exits
# Usage: /usr/bin/python3 bench/small_step/small_step.py DIR [--threads 2] [--profile N]
#   --profile N: instead, run 6 warm-up steps and N steps under torch.profiler and print its table
import json
import math
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

d = sys.argv[1]
threads = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2
torch.set_num_threads(threads)
man = json.load(open(f"{d}/manifest.json"))
cfg = man["cfg"]
V, C, H, L, T, B, lr = cfg["V"], cfg["C"], cfg["H"], cfg["L"], cfg["T"], cfg["B"], cfg["lr"]
flat = np.fromfile(f"{d}/weights.f32", dtype="<f4")
P = {}
o = 0
for p in man["params"]:
    n = int(np.prod(p["shape"]))
    P[p["name"]] = torch.from_numpy(flat[o : o + n].copy()).view(p["shape"]).requires_grad_(True)
    o += n
assert o == flat.size
bt = torch.from_numpy(np.fromfile(f"{d}/batches.i32", dtype="<i4").astype(np.int64)).view(man["nBatches"], 2, B, T)
mask = torch.ones(T, T, dtype=torch.bool).triu(1)
hs = C // H


def loss_of(idx, tgt):
    x = F.embedding(idx, P["wte"]) + P["wpe"]
    for l in range(L):
        p = lambda n: P[f"h{l}.{n}"]
        h = F.layer_norm(x, [C], p("ln1w"), p("ln1b"))
        q, k, v = [t.view(B, T, H, hs).transpose(1, 2) for t in (h.matmul(p("wqkv")) + p("bqkv")).split(C, 2)]
        att = (q.matmul(k.transpose(-2, -1)) * (1 / math.sqrt(hs))).masked_fill(mask, float("-inf")).softmax(-1)
        y = att.matmul(v).transpose(1, 2).reshape(B, T, C)
        x = x + (y.matmul(p("wproj")) + p("bproj"))
        h = F.layer_norm(x, [C], p("ln2w"), p("ln2b"))
        x = x + (F.gelu(h.matmul(p("wfc")) + p("bfc")).matmul(p("wfc2")) + p("bfc2"))
    logits = F.layer_norm(x, [C], P["lnfw"], P["lnfb"]).matmul(P["wlm"])
    return F.cross_entropy(logits.view(-1, V), tgt.reshape(-1))


def step(i):
    idx, tgt = bt[i % bt.shape[0], 0], bt[i % bt.shape[0], 1]
    l = loss_of(idx, tgt)
    l.backward()
    with torch.no_grad():
        for p in P.values():
            p.sub_(p.grad * lr)
            p.grad = None
    return l.item()


if "--profile" in sys.argv:
    n = int(sys.argv[sys.argv.index("--profile") + 1])
    for i in range(6):
        step(i)
    from torch.profiler import profile, ProfilerActivity
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(6, 6 + n):
            step(i)
    wall = (time.perf_counter() - t0) * 1000 / n
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads: {wall:.2f} ms/step under the profiler ({n} steps)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
    sys.exit(0)

print(json.dumps({"ready": True, "torch": torch.__version__, "threads": torch.get_num_threads()}), flush=True)
i = 0
for line in sys.stdin:
    cmd = line.split()
    if not cmd or cmd[0] == "quit":
        break
    times, losses = [], []
    for _ in range(int(cmd[1])):
        t0 = time.perf_counter()
        losses.append(step(i))
        times.append((time.perf_counter() - t0) * 1000)
        i += 1
    print(json.dumps({"times": times, "losses": losses}), flush=True)
