// DDP's bucket assignment against PyTorch 1.13's (dist._compute_bucket_assignment_by_size, run in
// Debian's python3-torch): construction order (sorted by smallest index), a rebuild order, mixed
// dtypes, the small first bucket.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { distributed as dist } from "../../src/index.js";
import type { DType } from "../../src/ir/dtype.js";

const MB = 1024 * 1024;
interface Case {
  tensors: { numel: number; dtype: DType }[];
  limits: number[];
  order?: number[];
}
const T = (numel: number, dtype: DType = "float32") => ({ numel, dtype });
const cases: Case[] = [
  { tensors: [T(100000), T(300000), T(10), T(200000), T(50000), T(400000), T(7)], limits: [MB, 2 * MB] },
  { tensors: [T(100000), T(300000), T(10), T(200000), T(50000), T(400000), T(7)], limits: [MB, 2 * MB], order: [6, 5, 4, 3, 2, 1, 0] },
  { tensors: [T(10), T(10, "float64"), T(300000), T(300000, "float64"), T(5, "float16"), T(70000, "bfloat16")], limits: [1024] },
  { tensors: [T(65536), T(256), T(65536), T(256), T(65536), T(256), T(65536), T(256)], limits: [MB, 0.3 * MB], order: [7, 6, 5, 4, 3, 2, 1, 0] },
  { tensors: [T(65536), T(256), T(65536), T(256)], limits: [Number.MAX_SAFE_INTEGER], order: [3, 1, 2, 0] },
  { tensors: [T(1000), T(1), T(262144), T(3), T(262144, "float64")], limits: [MB, 25 * MB], order: [4, 2, 0, 3, 1] },
];

test("computeBucketAssignmentBySize equals PyTorch 1.13's", () => {
  // python gets the tensors in visiting order, labelled by their indices (its tensor_indices)
  const code = `
import json, sys, torch, torch.distributed as dist
DT = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16}
out = []
for c in json.loads(sys.argv[1]):
    ts = [torch.zeros(t["numel"], dtype=DT[t["dtype"]]) for t in c["tensors"]]
    limits = [int(x) for x in c["limits"]]
    if c.get("order") is None:
        b, l = dist._compute_bucket_assignment_by_size(ts, limits)
    else:
        b, l = dist._compute_bucket_assignment_by_size([ts[i] for i in c["order"]], limits, [False] * len(ts), c["order"])
    out.append({"buckets": b, "limits": l})
print(json.dumps(out))`;
  const want = JSON.parse(execFileSync("/usr/bin/python3", ["-c", code, JSON.stringify(cases.map((c) => ({ ...c, limits: c.limits.map(Math.floor) })))], { encoding: "utf8", timeout: 60_000 })) as {
    buckets: number[][];
    limits: number[];
  }[];
  for (const [i, c] of cases.entries()) {
    const got = dist.computeBucketAssignmentBySize(c.tensors, c.limits.map(Math.floor), c.order);
    assert.deepEqual(got, want[i], `case ${i}`);
  }
});
