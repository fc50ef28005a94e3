// Error messages: PyTorch's wording, prefixed with the op the user called and, for shape
// errors, both shapes. Expected texts are PyTorch 1.13's where PyTorch has the same error.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

test("errors: broadcasting mismatch in add names the op and both shapes", () => {
  assert.throws(
    () => torch.ones(2, 3).add(torch.ones(4)),
    (e: Error) => {
      assert.ok(e instanceof RangeError);
      assert.match(e.message, /^add: /);
      assert.match(
        e.message,
        /The size of tensor a \(3\) must match the size of tensor b \(4\) at non-singleton dimension 1/,
      );
      assert.match(e.message, /\[2, 3\]/);
      assert.match(e.message, /\[4\]/);
      return true;
    },
  );
  assert.throws(() => torch.ones(3).mul(torch.ones(2, 2)), /^RangeError: mul: .*\[3\].*\[2, 2\]/);
});

test("errors: matmul shape mismatch names the op and both shapes", () => {
  assert.throws(
    () => torch.ones(2, 3).matmul(torch.ones(4, 5)),
    (e: Error) => {
      assert.match(e.message, /^matmul\(\): /);
      assert.match(e.message, /mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)/);
      assert.match(e.message, /\[2, 3\].*\[4, 5\]/);
      return true;
    },
  );
  assert.throws(
    () => torch.ones(2, 3).mm(torch.ones(4, 5)),
    /mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)/,
  );
});

test("errors: other shape errors", () => {
  assert.throws(() => torch.ones(2, 3).view(4), /^Error: view\(\): shape '\[4\]' is invalid for input of size 6$/);
  assert.throws(() => torch.ones(2, 3).reshape(5), /reshape\(\): shape '\[5\]' is invalid for input of size 6/);
  assert.throws(
    () => torch.cat([torch.ones(2, 3), torch.ones(2, 4)]),
    /Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for tensor number 1 in the list/,
  );
  assert.throws(
    () => torch.ones(2, 3).expand(4, 4),
    /^RangeError: expand: The expanded size of the tensor \(4\) must match the existing size \(\d\).*Target sizes: \[4, 4\]. {2}Tensor sizes: \[2, 3\]/,
  );
});

test("errors: dtype errors", () => {
  assert.throws(() => torch.ones(2).bitwiseAnd(torch.ones(2)), /"bitwise_and_cpu" not implemented for 'float32'/);
  assert.throws(
    () => torch.ones(2, { dtype: "int64" }).requiresGrad_(),
    /only Tensors of floating point dtype can require gradients \(got int64\)/,
  );
  assert.throws(() => torch.setDefaultDtype("int32"), /only floating-point types are supported as the default type/);
});

test("errors: tensors on different devices", () => {
  // a second device: the cpu plugin under another name
  torch.registerDevice("fake", { ...torch.getDevice("cpu"), name: "fake" });
  const a = torch.ones(2, { device: "fake" });
  assert.equal(a.device, "fake");
  const msg = /Expected all tensors to be on the same device, but found at least two devices, fake and cpu!/;
  assert.throws(
    () => a.add(torch.ones(2)),
    (e: Error) => /^add: /.test(e.message) && msg.test(e.message),
  );
  assert.throws(() => torch.ones(2, 2, { device: "fake" }).matmul(torch.ones(2, 2)), msg);
  assert.equal(a.add(1).device, "fake", "scalars follow the tensor's device");
  assert.deepEqual(a.to("cpu").add(torch.ones(2))._tolistSync(), [2, 2]);
  assert.throws(
    () => torch.ones(2, { device: "nope" }),
    /Expected one of the registered device types \(.*cpu.*\) at start of device string: nope/,
  );
});

test("errors: index and dimension out of range", async () => {
  const t = torch.ones(2, 3);
  assert.throws(() => t.select(1, 5), /select\(\): index 5 out of range for tensor of size \[2, 3\] at dimension 1/);
  assert.throws(() => t.sum(4), /sum: Dimension out of range \(expected to be in range of \[-2, 1\], but got 4\)/);
  assert.throws(() => t.size(3), /Dimension out of range \(expected to be in range of \[-2, 1\], but got 3\)/);
  assert.throws(() => t.narrow(1, 2, 5), /start \(2\) \+ length \(5\) exceeds dimension size \(3\)/);
  await assert.rejects(() => t.item(), /a Tensor with 6 elements cannot be converted to Scalar/);
});

test("errors: backward twice through a freed graph", async () => {
  const x = torch.ones(2).requiresGrad_();
  const y = x.exp().sum();
  y.backward();
  assert.throws(
    () => y.backward(),
    /^Error: backward\(\): Trying to backward through the graph a second time \(or directly access saved tensors after they have already been freed\)\. Saved intermediate values of the graph are freed when you call \.backward\(\) or autograd\.grad\(\)\. Specify retainGraph: true/,
  );
  // retainGraph keeps it usable
  const z = x.exp().sum();
  z.backward(null, { retainGraph: true });
  z.backward();
  assert.ok(Math.abs(((await x.grad!.tolist()) as number[])[0]! - 3 * Math.E) < 1e-5);
});

test("errors: in-place on a leaf that requires grad", () => {
  const x = torch.ones(2).requiresGrad_();
  assert.throws(() => x.add_(1), /add_: a leaf Variable that requires grad is being used in an in-place operation\./);
  assert.throws(
    () => x.narrow(0, 0, 1).zero_(),
    /a view of a leaf Variable that requires grad is being used in an in-place operation/,
  );
  torch.noGrad(() => x.add_(1)); // allowed under noGrad, like PyTorch
  assert.deepEqual(x._tolistSync(), [2, 2]);
});

test("errors: using a saved tensor modified in place", () => {
  const x = torch.ones(2).requiresGrad_();
  const y = x.exp();
  const z = y.exp().sum(); // saves y
  y.add_(1);
  assert.throws(
    () => z.backward(),
    /one of the variables needed for gradient computation has been modified by an inplace operation: .*\[2\].*ExpBackward0.* is at version 1; expected version 0 instead/,
  );
});

test("errors: reading or using a disposed tensor", async () => {
  const x = torch.ones(2);
  x.dispose();
  assert.equal(x.isDisposed, true);
  const msg = /Tensor has been disposed \(by dispose\(\), `using` or torch.scope\) and can no longer be used/;
  await assert.rejects(() => x.tolist(), msg);
  await assert.rejects(() => x.data(), msg);
  assert.throws(() => x.add(1), msg);
  assert.equal(String(x), "tensor(<disposed>)");
  x.dispose(); // idempotent
});

test("errors: torch.scope takes a function; one that throws leaves the scopes as they were", async () => {
  for (const bad of [5, null, undefined, "x", {}])
    assert.throws(() => torch.scope(bad as never), /^TypeError: scope\(\): argument 'fn' must be a function, got /);
  const x = torch.ones(3);
  assert.throws(
    () =>
      torch.scope(() => {
        x.mul(2);
        throw new Error("boom");
      }),
    /boom/,
  );
  // no scope is left open: a tensor made now belongs to no scope's list, so once dropped the
  // collector frees it (an open scope's list would keep it reachable)
  const gc = (globalThis as { gc?: () => void }).gc;
  assert.ok(gc, "run with --expose-gc");
  const settle = async () => {
    for (let i = 0; i < 3; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 0));
    }
    return torch.memory.stats().liveBytes;
  };
  const before = await settle();
  // made and dropped inside a function: nothing of the test references it afterwards
  const grew = (() => {
    torch.zeros(4096);
    return torch.memory.stats().liveBytes - before;
  })();
  assert.equal(grew, 4096 * 4);
  assert.equal(await settle(), before, "the dropped tensor was collected");
  const r = torch.scope(() => x.add(1));
  assert.deepEqual(await r.tolist(), [2, 2, 2]);
});
