// torch.export.export: the forward frozen into core ops with a signature, dynamic dims with their
// ranges, `.module()` equal to the original module in every eager mode at the sample and at two
// other sizes, PyTorch's golden outputs reproduced, save/load round trips, and errors that name
// the op and the line of the forward that called it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as torch from "../../src/index.js";
import { CORE_OPS } from "../../src/export/core.js";
import { allCases, maxAbsDiff, mingpt, type Case } from "./models.js";

const Dim = torch.export.Dim;
const forward = (c: Case, a: unknown[]) => c.pick(torch.noGrad(() => (c.module.forward as (...x: unknown[]) => unknown)(...a)));

test("export: every model's program runs in every eager mode like the module, at three sizes, and matches PyTorch", async () => {
  const dir = mkdtempSync(join(tmpdir(), "torchts-export-"));
  try {
    for (const c of await allCases()) {
      const ep = torch.export.export(c.module, c.args, { dynamicShapes: c.dynamicShapes });
      for (const n of ep.graph.nodes) assert.ok(n.op in CORE_OPS, `${c.name}: ${n.op} is not a core op`);
      assert.ok(ep.graph.dims.length >= 1, `${c.name}: dynamic dims recorded`);
      const path = join(dir, `${c.name}.pt2`);
      await torch.export.save(ep, path);
      const loaded = await torch.export.load(path);
      assert.equal(loaded.toString(), ep.toString(), `${c.name}: the graph survives save/load`);
      for (const mode of ["strict", "fused", "debug"] as const) {
        for (const [i, a] of [c.args, ...c.others].entries()) {
          const want = forward(c, a);
          const got = torch.withEagerMode(mode, () => c.pick(torch.noGrad(() => (i === 2 ? loaded : ep).module().forward(...a))));
          const d = await maxAbsDiff(got, want);
          assert.ok(d < 1e-4, `${c.name} (${mode}, input set ${i}, shape ${want.shape}): max abs diff ${d}`);
        }
      }
      if (c.golden) {
        const got = c.pick(torch.noGrad(() => ep.module().forward(...c.golden!.args)));
        const d = await maxAbsDiff(got, c.golden.want);
        assert.ok(d < 1e-4, `${c.name}: the exported program is ${d} from PyTorch's output`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("export: signature, state, symbolic shapes and range checks (minGPT)", async () => {
  const c = await mingpt();
  const ep = torch.export.export(c.module, c.args, { dynamicShapes: c.dynamicShapes });
  const sig = ep.graphSignature;
  const user = sig.inputSpecs.filter((s) => s.kind === "user_input");
  assert.deepEqual(user, [{ kind: "user_input", name: "args[0]", shape: ["batch", "seq"], dtype: "int64" }]);
  assert.equal(sig.inputSpecs.filter((s) => s.kind === "parameter").length, [...(c.module as torch.nn.Module).parameters()].length);
  assert.deepEqual(sig.outputSpecs, [{ name: "out.logits", shape: ["batch", "seq", "65"], dtype: "float32" }]);
  assert.deepEqual(ep.rangeConstraints, { batch: { min: 1, max: 16 }, seq: { min: 1, max: 32 } });
  // the attention's reshape targets are expressions over the dims, not the sample's sizes
  assert.match(ep.toString(), /reshape\(%\d+, \[batch, seq, 2, 16\]\)/);
  const m = ep.module();
  assert.deepEqual([...m.stateDict().keys()], [...(c.module as torch.nn.Module).stateDict().keys()]);
  assert.throws(() => m.forward(torch.zeros([2, 33], { dtype: "int64" })), /args\[0\]\.shape\[1\] \(dim 'seq'\) to be <= 32, but got 33/);
  assert.throws(() => m.forward(torch.zeros([2, 8])), /expected args\[0\] to be int64, got float32/);
  // a static export fixes the sizes
  const st = torch.export.export(c.module, c.args);
  assert.equal(st.graph.dims.length, 0);
  assert.throws(() => st.module().forward(torch.zeros([3, 8], { dtype: "int64" })), /args\[0\]\.shape\[0\] to be 2, but got 3/);
});

test("export: host reads, random ops, unmapped ops and size-dependent control flow name the op and the call site", () => {
  const x = torch.randn(2, 4);
  const n = { 1: Dim("n", { max: 9 }) };
  const cases: [string, (x: torch.Tensor) => unknown, unknown[] | undefined, RegExp][] = [
    ["item", (x) => x.mul(x.sum().item() as unknown as number), undefined, /reads a tensor on the host \(item\) at .*export\.test\.ts:\d+/],
    ["topk", (x) => torch.topk(x, 2).values, undefined, /topk \(called at .*export\.test\.ts:\d+.*\) has no export mapping/],
    ["randn", (x) => x.add(torch.randn([2, 4])), undefined, /randn at .*export\.test\.ts:\d+.* draws random numbers/],
    ["control flow", (x) => (x.shape[1]! > 4 ? x.exp() : x.sin()), [n], /runs other ops with n=\d+: node 0 is (exp|sin).*export\.test\.ts/],
    ["host tensor", (x) => x.add(torch.tensor(Array.from({ length: x.shape[1]! }, (_, i) => i))), [n], /a tensor used by add at .*export\.test\.ts:\d+.* changes with the input sizes/],
    ["host float", (x) => x.mul(1 / x.shape[1]!), [n], /mul .*export\.test\.ts:\d+.*a non-integer argument changes with the dynamic dims/],
    ["in-place input", (x) => x.add_(1), undefined, /add_ at .*export\.test\.ts:\d+.* writes in place into an input/],
  ];
  for (const [what, f, dyn, re] of cases) assert.throws(() => torch.export.export(f, [x], { dynamicShapes: dyn }), re, what);
  // an in-place op on an intermediate is functionalized
  const ep = torch.export.export((x: torch.Tensor) => {
    const y = x.exp();
    y.mul_(2);
    return y.add(1);
  }, [x]);
  assert.deepEqual(ep.graph.nodes.map((nd) => nd.op), ["exp", "mul", "add"]);
  // clone is a copy: writing into it leaves its input alone
  const cl = torch.export.export((x: torch.Tensor) => {
    const y = x.clone();
    y.mul_(3);
    return [x.add(0), y];
  }, [x]);
  const [a, b] = cl.module().forward(x) as torch.Tensor[];
  assert.ok(a!.sub(x).abs().max()._contiguousHost()[0] === 0 && b!.sub(x.mul(3)).abs().max()._contiguousHost()[0]! < 1e-6);
});
