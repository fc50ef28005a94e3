// nn.Module mechanics: registration by assignment, traversal order, stateDict and its
// errors, hooks, train/eval, to(dtype), zeroGrad, apply, requiresGrad_.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

const nn = torch.nn;
type Linear = InstanceType<typeof nn.Linear>;

class Net extends nn.Module {
  fc1 = new nn.Linear(2, 3); // class-field initialiser registers too
  declare fc2: Linear;
  declare scale: InstanceType<typeof nn.Parameter>;
  constructor() {
    super();
    this.fc2 = new nn.Linear(3, 1);
    this.scale = new nn.Parameter(torch.ones(1));
    this.registerBuffer("steps", torch.zeros(1));
    this.registerBuffer("cache", torch.zeros(2), { persistent: false });
  }
  override forward(x: torch.Tensor): torch.Tensor {
    return this.fc2.call(torch.relu(this.fc1.call(x))).mul(this.scale);
  }
}

test("assigning Parameters and Modules registers them, in PyTorch's order", () => {
  const n = new Net();
  assert.deepEqual([...n.namedParameters()].map(([k]) => k), ["scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]);
  assert.deepEqual([...n.namedBuffers()].map(([k]) => k), ["steps", "cache"]);
  assert.deepEqual([...n.namedChildren()].map(([k]) => k), ["fc1", "fc2"]);
  assert.deepEqual([...n.namedModules()].map(([k]) => k), ["", "fc1", "fc2"]);
  assert.equal([...n.modules()].length, 3);
  assert.equal([...n.children()][1], n.fc2);
  assert.equal([...n.parameters()].length, 5);
  assert.equal([...n.parameters(false)].length, 1);
  assert.equal([...n.buffers()].length, 2);
  assert.ok(n.fc1.weight.requiresGrad);
  assert.ok(n.fc1.weight instanceof torch.Tensor);
  assert.equal(n.getSubmodule("fc2"), n.fc2);
  assert.equal(n.getParameter("fc1.bias"), n.fc1.bias);
  // a plain Tensor is just an attribute, but cannot replace a registered parameter
  (n as unknown as { plain: torch.Tensor }).plain = torch.zeros(1);
  assert.equal([...n.parameters()].length, 5);
  assert.throws(() => ((n as unknown as { scale: torch.Tensor }).scale = torch.zeros(1)), /cannot assign 'torch.FloatTensor' as parameter 'scale' \(torch.nn.Parameter or None expected\)/);
  (n as unknown as { scale: null }).scale = null;
  assert.deepEqual([...n.namedParameters()].map(([k]) => k)[0], "fc1.weight");
  assert.throws(() => n.registerParameter("a.b", null), /parameter name can't contain "."/);
  assert.throws(() => n.registerBuffer("fc1", torch.zeros(1)), /attribute 'fc1' already exists/);
  // shared modules are visited once
  const shared = new nn.Linear(1, 1);
  const s = new nn.Sequential(shared, shared);
  assert.equal([...s.parameters()].length, 2);
});

test("stateDict holds persistent buffers and aliases the parameters; loadStateDict copies in", async () => {
  const a = new Net();
  const b = new Net();
  const sd = a.stateDict();
  assert.deepEqual([...sd.keys()], ["scale", "steps", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]);
  assert.equal(sd.get("fc1.weight")!.requiresGrad, false);
  const r = b.loadStateDict(sd);
  assert.deepEqual(r, { missingKeys: [], unexpectedKeys: [] });
  assert.deepEqual(await b.fc1.weight.tolist(), await a.fc1.weight.tolist());
  assert.notEqual(b.fc1.weight, a.fc1.weight);
  const x = torch.tensor([[0.5, -1]], { dtype: "float32" });
  assert.deepEqual(await b.call(x).tolist(), await a.call(x).tolist());
  // records too
  b.loadStateDict(Object.fromEntries(sd));
});

test("loadStateDict reports missing, unexpected and size-mismatched keys like PyTorch", () => {
  const m = new nn.Linear(2, 3);
  const sd = new Map([["weight", torch.zeros(2, 2)], ["foo", torch.zeros(1)]]);
  assert.throws(
    () => m.loadStateDict(sd),
    (e: Error) =>
      e.message ===
      'Error(s) in loading state_dict for Linear:\n\tMissing key(s) in state_dict: "bias". \n\tUnexpected key(s) in state_dict: "foo". \n\tsize mismatch for weight: copying a param with shape torch.Size([2, 2]) from checkpoint, the shape in current model is torch.Size([3, 2]).',
  );
  const r = m.loadStateDict(new Map([["weight", torch.ones(3, 2)], ["foo", torch.zeros(1)]]), { strict: false });
  assert.deepEqual(r, { missingKeys: ["bias"], unexpectedKeys: ["foo"] });
  assert.throws(() => m.loadStateDict(new Map([["weight", torch.ones(2, 2)]]), { strict: false }), /size mismatch for weight/);
});

test("train/eval propagate; to(dtype) keeps Parameter identity; apply visits children first", () => {
  const n = new Net();
  n.eval();
  assert.equal(n.training, false);
  assert.equal(n.fc1.training, false);
  n.train();
  assert.equal(n.fc2.training, true);
  const w = n.fc1.weight;
  n.to("float64");
  assert.equal(n.fc1.weight, w);
  assert.equal(w.dtype, "float64");
  assert.equal(n.stateDict().get("steps")!.dtype, "float64");
  assert.equal(n.call(torch.zeros([1, 2], { dtype: "float64" })).dtype, "float64");
  n.to({ dtype: "float32" });
  assert.equal(w.dtype, "float32");
  const seen: string[] = [];
  n.apply((m) => seen.push(m.constructor.name));
  assert.deepEqual(seen, ["Linear", "Linear", "Net"]);
});

test("zeroGrad and requiresGrad_ act on every parameter", async () => {
  const n = new Net();
  n.call(torch.ones(4, 2)).sum().backward();
  assert.ok(n.fc1.weight.grad);
  n.zeroGrad({ setToNone: false });
  assert.deepEqual(await n.fc2.bias!.grad!.tolist(), [0]);
  n.zeroGrad();
  assert.equal(n.fc2.bias!.grad, null);
  n.requiresGrad_(false);
  assert.ok([...n.parameters()].every((p) => !p.requiresGrad));
});

test("forward hooks and pre-hooks run through call(), can replace args/output, and can be removed", async () => {
  const m = new nn.Linear(2, 2, { bias: false });
  torch.noGrad(() => m.weight.copy_(torch.eye(2)));
  const calls: string[] = [];
  const h1 = m.registerForwardPreHook((_m, args) => {
    calls.push("pre");
    return [(args[0] as torch.Tensor).mul(2)];
  });
  const h2 = m.registerForwardHook((_m, _args, out) => {
    calls.push("post");
    return (out as torch.Tensor).add(1);
  });
  const x = torch.tensor([[1, 2]], { dtype: "float32" });
  assert.deepEqual(await m.call(x).tolist(), [[3, 5]]);
  assert.deepEqual(await m.forward(x).tolist(), [[1, 2]]); // forward alone skips hooks
  assert.deepEqual(calls, ["pre", "post"]);
  h1.remove();
  h2.remove();
  assert.deepEqual(await m.call(x).tolist(), [[1, 2]]);
});

test("a module without forward says so", () => {
  class Empty extends nn.Module {}
  assert.throws(() => new Empty().call(), /Module \[Empty\] is missing the required "forward" function/);
});

test("training a tiny MLP with Adam reduces the loss", async () => {
  torch.manualSeed(0);
  const model = new nn.Sequential(new nn.Linear(2, 16), new nn.Tanh(), new nn.Linear(16, 1));
  const opt = new torch.optim.Adam(model.parameters(), { lr: 0.05 });
  const x = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1]], { dtype: "float32" });
  const y = torch.tensor([[0], [1], [1], [0]], { dtype: "float32" });
  const lossFn = new nn.MSELoss();
  let first = 0;
  let last = 0;
  for (let i = 0; i < 150; i++) {
    opt.zeroGrad();
    const loss = lossFn.call(model.call(x), y);
    loss.backward();
    opt.step();
    if (i === 0) first = await loss.item();
    last = await loss.item();
  }
  assert.ok(last < first * 0.1, `loss ${first} -> ${last}`);
});
