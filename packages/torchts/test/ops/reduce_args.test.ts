// The reductions, scans and sorting through the op table: PyTorch's calling convention (expected
// values and messages from PyTorch 1.13), and every op's positional, options and mixed forms agreeing.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { Tensor } from "../../src/index.js";
import { OPINFO } from "./opinfo/reduce.js";
import { checkForms } from "./forms_helper.js";

/** [[0, 1, 2], [3, 4, 5]] */
const x = () => torch.arange(6).float().reshape(2, 3);
const vals = (t: Tensor) => t._tolistSync();
const close = (got: number[], want: number[], tol = 1e-4) =>
  assert.ok(got.length === want.length && got.every((g, i) => Math.abs(g - want[i]!) <= tol), `${got} != ${want}`);
/** calls PyTorch rejects, without the TypeScript signature */
const untyped = (t: Tensor) => t as unknown as Record<string, (...a: unknown[]) => unknown>;
const T = torch as unknown as Record<string, (...a: unknown[]) => unknown>;

test("x.cumsum({ dim: 1 }) scans dim 1 (it threw)", () => {
  const want = [[0, 1, 3], [3, 7, 12]];
  assert.deepEqual(vals(x().cumsum({ dim: 1 })), want);
  assert.deepEqual(vals(torch.cumsum(x(), { dim: 1 })), want);
  assert.deepEqual(vals(torch.cumsum(x(), 1)), want);
  assert.deepEqual(vals(x().cumsum(1, { dtype: "int64" })), want);
  assert.equal(x().cumsum(1, { dtype: "int64" }).dtype, "int64");
  // dtype is keyword-only; a 0-dim input scans dim 0 or -1 only (PyTorch: IndexError "Dimension out of range")
  assert.throws(() => untyped(x()).cumsum!(1, "int64"), { name: "TypeError", message: "cumsum() takes 1 positional argument but 2 were given" });
  assert.throws(() => torch.cumsum(torch.tensor(3), 1), (e: Error) => e instanceof RangeError && /^cumsum.*Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)/.test(e.message));
  assert.deepEqual(vals(torch.cumsum(torch.tensor(3), 0)), 3);
});

test("x.norm({ p: 2, dim: 1 }) reduces dim 1 (it reduced over everything)", () => {
  close(vals(x().norm({ p: 2, dim: 1 })) as number[], [Math.sqrt(5), Math.sqrt(50)]);
  close(vals(x().norm({ dim: 1 })) as number[], [Math.sqrt(5), Math.sqrt(50)]); // p='fro' over one dim = 2-norm
  close(vals(torch.norm(x(), "fro", 1)) as number[], [Math.sqrt(5), Math.sqrt(50)]);
  close([vals(torch.norm(x(), 1, [0, 1])) as number], [15]);
  close([vals(x().norm(Infinity)) as number], [5]);
  close(vals(torch.norm(x(), -1, 1)) as number[], [0, 1 / (1 / 3 + 1 / 4 + 1 / 5)]);
  const d = torch.norm(x(), 2, 1, false, { dtype: "float64" });
  assert.equal(d.dtype, "float64");
  // PyTorch: RuntimeError "only valid string values are 'fro' and 'nuc', found inf"; ValueError for dtype with 'fro'
  assert.throws(() => untyped(x()).norm!("inf"), (e: Error) => e.constructor === Error && /^norm\(\): only valid string values are 'fro' and 'nuc', found inf/.test(e.message));
  assert.throws(() => x().norm({ dtype: "float64" }), /dtype argument is not supported in frobenius norm/);
  // PyTorch: RuntimeError "norm(): input dtype should be either floating point or complex. Got Long instead."
  assert.throws(() => torch.arange(3).norm(), (e: Error) => e.constructor === Error && /input dtype should be either floating point or complex. Got Long instead/.test(e.message));
});

test("x.topk(2, 0, false): positional order is k, dim, largest, sorted (it worked on dim -1)", () => {
  const r = x().topk(2, 0, false);
  assert.deepEqual(vals(r.values), [[0, 1, 2], [3, 4, 5]]);
  assert.deepEqual(vals(r.indices), [[0, 0, 0], [1, 1, 1]]);
  const s = torch.topk(x(), 2, { dim: 0, largest: false });
  assert.deepEqual(vals(s.values), [[0, 1, 2], [3, 4, 5]]);
  const [v, i] = x().topk(2);
  assert.deepEqual(vals(v), [[2, 1], [5, 4]]);
  assert.deepEqual(vals(i), [[2, 1], [2, 1]]);
  // PyTorch: RuntimeError "selected index k out of range"; IndexError for the dim
  assert.throws(() => x().topk(4), (e: Error) => e.constructor === Error && /^topk\(\): selected index k out of range/.test(e.message));
  assert.throws(() => x().topk(-1), /selected index k out of range/);
  assert.throws(() => x().topk(2, 5), (e: Error) => e instanceof RangeError && /Dimension out of range \(expected to be in range of \[-2, 1\], but got 5\)/.test(e.message));
  assert.throws(() => untyped(x()).topk!(1.5), { name: "TypeError", message: "topk(): argument 'k' (position 1) must be int, not float" });
});

test("x.sum({ dim: 0, keepDim: true }) is PyTorch's TypeError for an unknown keyword", () => {
  assert.throws(() => T.sum!(x(), { dim: 0, keepDim: true }), {
    name: "TypeError",
    message: "sum() got an unexpected keyword argument 'keepDim' (did you mean 'keepdim'?)",
  });
  assert.throws(() => untyped(x()).sum!({ dim: 0, keepDim: true }), (e: Error) => e instanceof TypeError && /^sum\(\) got an unexpected keyword argument 'keepDim'/.test(e.message));
  assert.deepEqual(vals(x().sum({ dim: 0, keepdim: true })), [[3, 5, 7]]);
});

test("sum / mean: dim=None and dim=[] reduce everything (PyTorch 1.13); dtype is keyword-only", () => {
  assert.equal(vals(x().sum([])), 15);
  assert.equal(vals(x().sum(null)), 15);
  assert.equal(vals(torch.amax(x(), [])), 5);
  assert.equal(vals(x().mean()), 2.5);
  assert.deepEqual(vals(x().mean(0, true, { dtype: "float64" })), [[1.5, 2.5, 3.5]]);
  assert.equal(torch.arange(6).sum().dtype, "int64");
  assert.equal(x().sum(0, { dtype: "int32" }).dtype, "int32");
  assert.throws(() => untyped(x()).sum!(0, true, "float64"), { name: "TypeError", message: "sum() takes from 0 to 2 positional arguments but 3 were given" });
  // PyTorch: RuntimeError "mean(): could not infer output dtype. ... Got: Long"
  assert.throws(() => torch.arange(3).mean(), (e: Error) => e.constructor === Error && /^mean\(\): could not infer output dtype.*Got: Long/.test(e.message));
  assert.equal(vals(torch.mean(torch.arange(6), { dtype: "float32" })), 2.5);
});

test("max / min overloads: max(), max(dim, keepdim) -> values/indices, max(other)", () => {
  assert.equal(vals(x().max()), 5);
  const r = x().max(1);
  assert.deepEqual(vals(r.values), [2, 5]);
  assert.deepEqual(vals(r.indices), [2, 2]);
  assert.deepEqual(vals(x().max({ dim: 1, keepdim: true }).values), [[2], [5]]);
  assert.deepEqual(vals(torch.min(x(), 0, true).indices), [[0, 0, 0]]);
  assert.deepEqual(vals(x().max(torch.tensor([4, 0, 1]))), [[4, 1, 2], [4, 4, 5]]);
  assert.deepEqual(vals(x().max({ other: torch.full([3], 2.5) })), [[2.5, 2.5, 2.5], [3, 4, 5]]);
  assert.throws(() => untyped(x()).max!(1.5), (e: Error) => e instanceof TypeError && /^max\(\) received an invalid combination of arguments - got \(Tensor, float\)/.test(e.message));
  assert.throws(() => untyped(x()).max!(1, 1), (e: Error) => e instanceof TypeError && /^max\(\) received an invalid combination of arguments/.test(e.message));
  assert.throws(() => x().max(2), (e: Error) => e instanceof RangeError && /Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)/.test(e.message));
  // PyTorch: "max(): Expected reduction dim to be specified for input.numel() == 0."
  assert.throws(() => torch.zeros(0, 3).max(), /max\(\): Expected reduction dim to be specified for input.numel\(\) == 0/);
  assert.deepEqual(torch.zeros(0, 3).max(1).values.shape, [0]);
});

test("var / std: correction (keyword-only), unbiased (positional), unbiased alone", () => {
  close([vals(x().var()) as number], [3.5]);
  close(vals(x().var(1)) as number[], [1, 1]);
  close(vals(x().var(1, false)) as number[], [2 / 3, 2 / 3]);
  close(vals(x().var(1, { correction: 0 })) as number[], [2 / 3, 2 / 3]);
  close(vals(x().var({ dim: 1, unbiased: false })) as number[], [2 / 3, 2 / 3]);
  close([vals(x().var(false)) as number], [35 / 12]);
  close([vals(x().var({ unbiased: false })) as number], [35 / 12]);
  assert.deepEqual(x().var(1, true, true).shape, [2, 1]);
  close([vals(torch.std(x(), [])) as number], [Math.sqrt(3.5)]);
  const [v, m] = torch.varMean(x(), 1);
  close(vals(v) as number[], [1, 1]);
  close(vals(m) as number[], [1, 4]);
  const [s, m2] = torch.stdMean(x());
  close([vals(s) as number, vals(m2) as number], [Math.sqrt(3.5), 2.5]);
  // correction is keyword-only and an int in PyTorch 1.13
  assert.throws(() => untyped(x()).var!(1, { correction: 1.5 }), (e: Error) => e instanceof TypeError && /^var\(\) received an invalid combination/.test(e.message));
  // PyTorch: RuntimeError "std and var only support floating point and complex dtypes"
  assert.throws(() => torch.arange(4).var(), (e: Error) => e.constructor === Error && /std and var only support floating point and complex dtypes/.test(e.message));
});

test("argmax / argmin / amax / any / all / countNonzero / logsumexp / prod", () => {
  assert.equal(vals(x().argmax()), 5);
  assert.deepEqual(vals(x().argmax(1, true)), [[2], [2]]);
  assert.deepEqual(vals(x().argmin({ dim: 0 })), [0, 0, 0]);
  assert.deepEqual(vals(torch.amin(x(), [0, 1], true)), [[0]]);
  assert.deepEqual(vals(x().gt(1).any(1)), [true, true]);
  assert.deepEqual(vals(x().gt(0).all(1)), [false, true]);
  assert.equal(vals(x().all()), false);
  assert.equal(vals(torch.countNonzero(x())), 5);
  assert.deepEqual(vals(x().countNonzero([1])), [2, 3]);
  close(vals(torch.logsumexp(x(), 1)) as number[], [2.4076, 5.4076]);
  assert.deepEqual(vals(x().add(1).prod(1)), [6, 120]);
  assert.equal(vals(x().add(1).prod({ dtype: "float64" })), 720);
  assert.throws(() => untyped(x()).prod!(null), (e: Error) => e instanceof TypeError && /^prod\(\) received an invalid combination/.test(e.message));
  assert.throws(() => untyped(x()).any!(null), (e: Error) => e instanceof TypeError && /^any\(\)/.test(e.message));
  assert.throws(() => x().argmax(2), (e: Error) => e instanceof RangeError && /Dimension out of range/.test(e.message));
});

test("sort / argsort (stable keyword-only overload) / kthvalue / median", () => {
  const r = torch.tensor([[3, 1, 2], [0, 5, 4]]).float().sort(1, true);
  assert.deepEqual(vals(r.values), [[3, 2, 1], [5, 4, 0]]);
  assert.deepEqual(vals(r.indices), [[0, 2, 1], [1, 2, 0]]);
  assert.deepEqual(vals(x().sort({ stable: true, dim: 0, descending: true }).indices), [[1, 1, 1], [0, 0, 0]]);
  assert.deepEqual(vals(x().argsort(1, true)), [[2, 1, 0], [2, 1, 0]]);
  assert.deepEqual(vals(x().argsort({ stable: true })), [[0, 1, 2], [0, 1, 2]]);
  // PyTorch: with stable, dim and descending are keyword-only
  assert.throws(() => untyped(x()).sort!(1, true, { stable: true }), (e: Error) => e instanceof TypeError && /^sort\(\) received an invalid combination/.test(e.message));
  const k = x().kthvalue(1, 0, true);
  assert.deepEqual(vals(k.values), [[0, 1, 2]]);
  assert.deepEqual(vals(k.indices), [[0, 0, 0]]);
  // PyTorch: RuntimeError "kthvalue(): selected number k out of range for dimension 1"
  assert.throws(() => x().kthvalue(4), (e: Error) => e.constructor === Error && /^kthvalue\(\): selected number k out of range for dimension 1/.test(e.message));
  assert.throws(() => x().kthvalue(0), /selected number k out of range/);
  assert.equal(vals(x().median()), 2);
  const md = x().median(1);
  assert.deepEqual(vals(md.values), [1, 4]);
  assert.deepEqual(vals(md.indices), [1, 1]);
  assert.ok(Number.isNaN(vals(torch.zeros(0).median()) as number));
  assert.throws(() => torch.zeros(0, 3).median(0), /median\(\): Expected reduction dim 0 to have non-zero size/);
});

// ---- every op of the family: positional, options, all keywords, mixed and method forms agree
for (const [key, gen] of Object.entries(OPINFO)) test(`forms agree: ${key}`, () => checkForms(key, gen));
