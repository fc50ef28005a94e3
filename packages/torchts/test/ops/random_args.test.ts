// The random ops through the op table: PyTorch's calling convention and value checks (messages
// from PyTorch 1.13), a refused call leaving the generator where it was, and every op's calling
// forms agreeing when the generator is reseeded before each call.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { Tensor } from "../../src/index.js";
import { OPINFO } from "./opinfo/random.js";
import { checkForms } from "./forms_helper.js";

const vals = (t: Tensor) => t._tolistSync();
const T = torch as unknown as Record<string, (...a: unknown[]) => unknown>;
const untyped = (t: Tensor) => t as unknown as Record<string, (...a: unknown[]) => unknown>;

test("multinomial refuses negative, NaN and infinite probabilities (it accepted them)", () => {
  // PyTorch: RuntimeError "probability tensor contains either `inf`, `nan` or element < 0"
  for (const p of [[0.5, -0.1, 0.6], [0.5, NaN], [0.5, Infinity]])
    for (const replacement of [false, true])
      assert.throws(
        () => torch.multinomial(torch.tensor(p), 1, replacement),
        (e: Error) => e.constructor === Error && e.message === "multinomial(): probability tensor contains either `inf`, `nan` or element < 0",
      );
  assert.throws(() => torch.multinomial(torch.tensor([[1, 1], [0, 0]]).float(), 1), /invalid multinomial distribution \(sum of probabilities <= 0\)/);
  assert.throws(() => torch.multinomial(torch.tensor([0.5, 0.5]), 0), /^Error: multinomial\(\): cannot sample n_sample <= 0 samples/);
  assert.throws(() => torch.multinomial(torch.tensor([0.5, 0.5]), 3), /cannot sample n_sample > prob_dist.size\(-1\) samples without replacement/);
  assert.throws(() => torch.multinomial(torch.zeros(2, 2, 2), 1), /prob_dist must be 1 or 2 dim/);
  assert.throws(() => torch.multinomial(torch.tensor([1, 2]), 1), /multinomial only supports floating-point dtypes for input, got: Long/);
  // positional order: input, numSamples, replacement; generator keyword-only
  assert.deepEqual(torch.multinomial(torch.tensor([0.2, 0.8]), 5, true, { generator: new torch.Generator(1) }).shape, [5]);
  // the Tensor methods x.multinomial(...) / x.bernoulli(...) (PyTorch has both)
  assert.deepEqual(
    vals(torch.tensor([0.2, 0.8]).multinomial(5, true, { generator: new torch.Generator(1) })),
    vals(torch.multinomial(torch.tensor([0.2, 0.8]), 5, true, { generator: new torch.Generator(1) })),
  );
  assert.deepEqual(vals(torch.zeros(3).bernoulli(1)), [1, 1, 1]);
  assert.throws(() => T.multinomial!(torch.tensor([0.5, 0.5]), 1, true, new torch.Generator(1)), {
    name: "TypeError",
    message: "multinomial() takes from 2 to 3 positional arguments but 4 were given",
  });
});

test("bernoulli refuses probabilities outside [0, 1] (PyTorch's messages)", () => {
  // PyTorch: RuntimeError "Expected p_in >= 0 && p_in <= 1 to be true, but got false."
  for (const p of [[0.5, 1.5], [0.5, -0.5], [0.5, NaN]])
    assert.throws(() => torch.bernoulli(torch.tensor(p)), (e: Error) => e.constructor === Error && /^bernoulli\(\): Expected p_in >= 0 && p_in <= 1 to be true, but got false\./.test(e.message));
  // PyTorch: RuntimeError "bernoulli_ expects p to be in [0, 1], but got p=1.5"
  assert.throws(() => torch.bernoulli(torch.zeros(2), 1.5), (e: Error) => e.constructor === Error && /bernoulli_ expects p to be in \[0, 1\], but got p=1.5/.test(e.message));
  assert.throws(() => torch.bernoulli(torch.tensor([1, 0])), /"bernoulli_tensor_cpu_p_" not implemented for 'Long'/);
  // bernoulli(input, p): input's shape and dtype
  const b = torch.bernoulli(torch.zeros(3, { dtype: "int64" }), 1);
  assert.equal(b.dtype, "int64");
  assert.deepEqual(vals(b), [1, 1, 1]);
  assert.deepEqual(vals(torch.bernoulli(torch.tensor([0, 1]).float())), [0, 1]);
});

test("torch.randn(1e12) is an OutOfMemoryError naming randn (not 'Invalid typed array length'); the generator does not move", () => {
  torch.manualSeed(5);
  const before = torch.getRngState();
  for (const [name, f] of [
    ["randn", () => torch.randn(1e12)],
    ["rand", () => torch.rand(2 ** 31, 2 ** 31)],
    ["randint", () => torch.randint(5, [1e12])],
    ["randperm", () => torch.randperm(1e12)],
  ] as [string, () => unknown][])
    assert.throws(f, (e: Error) => e instanceof torch.OutOfMemoryError && e.message.startsWith(`${name}(): `) && !/Invalid typed array length/.test(e.message), name);
  assert.deepEqual(torch.getRngState(), before);
});

test("value checks where PyTorch has them (the generator untouched by a refused call)", () => {
  torch.manualSeed(3);
  const before = torch.getRngState();
  // PyTorch: RuntimeError for each
  assert.throws(() => torch.randint(5, 3, [2]), (e: Error) => e.constructor === Error && /random_ expects 'from' to be less than 'to', but got from=5 >= to=3/.test(e.message));
  assert.throws(() => torch.normal(0, -1, [2]), /normal expects std >= 0.0, but found std -1/);
  assert.throws(() => torch.normal(torch.zeros(2), -1), /normal expects std >= 0.0, but found std -1/);
  assert.throws(() => torch.normal(torch.zeros(2), torch.tensor([1, -1]).float()), /normal expects all elements of std >= 0.0/);
  assert.throws(() => torch.zeros(2).uniform_(1, 0), /uniform_ expects to return a \[from, to\) range, but found from=1 > to=0/);
  assert.throws(() => torch.zeros(2).uniform_(0, Infinity), /to is out of bounds for float/);
  assert.throws(() => torch.zeros(2).normal_(0, -1), /normal expects std >= 0.0, but found std -1/);
  assert.throws(() => torch.zeros(2, { dtype: "int64" }).normal_(), /"normal_kernel_cpu" not implemented for 'Long'/);
  assert.throws(() => torch.zeros(2, { dtype: "int64" }).uniform_(), /"check_uniform_bounds" not implemented for 'Long'/);
  assert.throws(() => torch.rand(2, { dtype: "int64" }), (e: Error) => e.constructor === Error && /^rand\(\): "check_uniform_bounds" not implemented for 'Long'/.test(e.message));
  assert.throws(() => torch.randn(2, { dtype: "int64" }), /"normal_kernel_cpu" not implemented for 'Long'/);
  assert.throws(() => torch.randLike(torch.zeros(2, { dtype: "int64" })), /"check_uniform_bounds" not implemented for 'Long'/);
  assert.throws(() => torch.randint(3, [2], { requiresGrad: true }), /Only Tensors of floating point and complex dtype can require gradients/);
  assert.throws(() => T.randint!(0, 3.5, [2]), (e: Error) => e instanceof TypeError && /^randint\(\) received an invalid combination of arguments/.test(e.message));
  assert.throws(() => T.normal!(2, 3), (e: Error) => e instanceof TypeError && /^normal\(\) received an invalid combination of arguments/.test(e.message));
  assert.throws(() => T.rand!(2, { generator: { seed: 1 } }), { name: "TypeError", message: "rand(): argument 'generator' must be torch.Generator, not dict" });
  assert.deepEqual(torch.getRngState(), before);
});

test("the keyword-only generator: rand(2, { generator }), x.uniform_(a, b, { generator })", () => {
  const a = vals(torch.rand(3, { generator: new torch.Generator(42) }));
  const b = vals(torch.zeros(3).uniform_(0, 1, { generator: new torch.Generator(42) }));
  assert.deepEqual(a, b);
  assert.throws(() => untyped(torch.zeros(3)).uniform_!(0, 1, new torch.Generator(1)), {
    name: "TypeError",
    message: "uniform_() takes from 0 to 2 positional arguments but 3 were given",
  });
  const n = torch.zeros(4).normal_({ mean: 2, std: 0, generator: new torch.Generator(1) });
  assert.deepEqual(vals(n), [2, 2, 2, 2]);
});

test("manualSeed / seed / getRngState / setRngState", () => {
  torch.manualSeed(7);
  const s = torch.getRngState();
  const a = vals(torch.rand(3));
  torch.setRngState(s);
  assert.deepEqual(vals(torch.rand(3)), a);
  torch.setRngState({ seed: s.seed, offset: s.offset });
  assert.deepEqual(vals(torch.rand(3)), a);
  torch.manualSeed(BigInt(7));
  assert.deepEqual(vals(torch.rand(3)), a);
  torch.manualSeed(-1); // PyTorch accepts negative seeds
  // PyTorch: RuntimeError "Overflow when unpacking long"
  assert.throws(() => torch.manualSeed(2 ** 64), (e: Error) => e.constructor === Error && /^manualSeed\(\): Overflow when unpacking long/.test(e.message));
  assert.throws(() => T.manualSeed!("1"), (e: Error) => e instanceof TypeError && /^manualSeed\(\): argument 'seed' must be int, not str/.test(e.message));
  assert.throws(() => torch.manualSeed(NaN), /^Error: manualSeed\(\): cannot convert float NaN to integer/);
  assert.throws(() => T.setRngState!({ seed: [1], offset: 0 }), /setRngState\(\): 'seed' must be two uint32 values/);
  assert.throws(() => T.setRngState!({ seed: [1, 2], offset: -1 }), /setRngState\(\): 'offset' must be a non-negative safe integer/);
  assert.throws(() => T.setRngState!({ seed: [1, 2] }), { name: "TypeError", message: 'setRngState() missing 1 required positional argument: "offset"' });
  assert.equal(typeof torch.seed(), "number");
  assert.throws(() => T.seed!(1), { name: "TypeError", message: "seed() takes 0 positional arguments but 1 was given" });
});

// ---- every op of the family: positional, options, all keywords, mixed, varargs and method forms
// agree when the generator is reseeded before each call (seed() draws a fresh seed: not compared)
for (const [key, gen] of Object.entries(OPINFO))
  if (key !== "seed") test(`forms agree: ${key}`, () => checkForms(key, gen, () => torch.manualSeed(1234)));
