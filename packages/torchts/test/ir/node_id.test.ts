// nodeId interns node structures by a numeric hash plus a structural check: two nodes get the
// same id exactly when their nodeKey strings (the compile cache's key) are equal, whatever their
// params, and a node mutated after it was interned does not change what its id matches.
import { test } from "node:test";
import assert from "node:assert/strict";
import { _sameParams, nodeId } from "../../src/ir/node_id.js";
import { nodeKey, type IRNode } from "../../src/ir/prims.js";

const v = (shape: number[], strides: number[], dtype = "float32") => ({ shape, strides, dtype }) as IRNode["inputs"][0];
const node = (prim: string, params: unknown, inputs: IRNode["inputs"], out: number[], dtype = "float32") =>
  ({ prim, params, inputs, out: { shape: out, dtype } }) as unknown as IRNode;

test("equal ids exactly for equal nodeKey strings", () => {
  const nodes: IRNode[] = [
    node("binary", { op: "add" }, [v([4, 3], [3, 1]), v([4, 3], [3, 1])], [4, 3]),
    node("binary", { op: "add" }, [v([4, 3], [3, 1]), v([4, 3], [0, 1])], [4, 3]),
    node("binary", { op: "mul" }, [v([4, 3], [3, 1]), v([4, 3], [3, 1])], [4, 3]),
    node("binary", { op: "add" }, [v([4, 3], [3, 1], "float64"), v([4, 3], [3, 1], "float64")], [4, 3], "float64"),
    node("binary", { op: "add" }, [v([3, 4], [4, 1]), v([3, 4], [4, 1])], [3, 4]),
    node("reduce", { op: "sum", axes: [0, 1] }, [v([4, 3], [3, 1])], [1, 1]),
    node("reduce", { op: "sum", axes: [1, 0] }, [v([4, 3], [3, 1])], [1, 1]),
    node("reduce", { op: "sum", axes: [0] }, [v([4, 3], [3, 1])], [1, 3]),
    node("reduce", { axes: [0, 1], op: "sum" }, [v([4, 3], [3, 1])], [1, 1]), // key order is part of the key
    node("composite", { name: "softmax", attrs: { dim: 1 } }, [v([4, 3], [3, 1])], [4, 3]),
    node("composite", { name: "softmax", attrs: { dim: 0 } }, [v([4, 3], [3, 1])], [4, 3]),
    node("unary", { op: "exp", extra: undefined }, [v([5], [1])], [5]),
    node("unary", { op: "exp" }, [v([5], [1])], [5]),
    node("full", {}, [], [2, 2]),
    node("full", {}, [], [4]),
    node("pad", { value: 0.5, mode: "constant" }, [v([5], [1])], [7]),
    node("pad", { value: 1.5, mode: "constant" }, [v([5], [1])], [7]),
    node("pad", { value: true, mode: "constant" }, [v([5], [1])], [7]),
  ];
  // fresh copies intern to the same ids as the originals
  const copies = nodes.map((n) => JSON.parse(JSON.stringify(n)) as IRNode);
  for (let i = 0; i < nodes.length; i++)
    for (let j = 0; j < nodes.length; j++) {
      const sameKey = nodeKey(nodes[i]!) === nodeKey(copies[j]!);
      assert.equal(nodeId(nodes[i]!) === nodeId(copies[j]!), sameKey, `${nodeKey(nodes[i]!)} vs ${nodeKey(copies[j]!)}`);
    }
});

test("a node changed after it was interned keeps matching the structure it had", () => {
  const a = node("binary", { op: "sub" }, [v([7, 2], [2, 1]), v([7, 2], [2, 1])], [7, 2]);
  const id = nodeId(a);
  (a.inputs[0]!.strides as number[])[0] = 0; // the caller reuses its arrays
  (a.params as { op: string }).op = "div";
  assert.notEqual(nodeId(a), id);
  assert.equal(nodeId(node("binary", { op: "sub" }, [v([7, 2], [2, 1]), v([7, 2], [2, 1])], [7, 2])), id);
});

test("params equality (what a hash collision falls back to): defined keys, their order and values", () => {
  assert.equal(_sameParams({ op: "sum", axes: [0, 1] }, { op: "sum", axes: [0, 1] }), true);
  assert.equal(_sameParams({ op: "sum", axes: [0, 1] }, { axes: [0, 1], op: "sum" }), false); // order is part of nodeKey
  assert.equal(_sameParams({ op: "exp", extra: undefined }, { op: "exp" }), true); // JSON drops undefined
  assert.equal(_sameParams({ op: "exp" }, { extra: undefined, op: "exp" }), true);
  assert.equal(_sameParams({ op: "exp" }, { op: "exp", extra: 1 }), false);
  assert.equal(_sameParams({ op: "exp", extra: 1 }, { op: "exp" }), false);
  assert.equal(_sameParams({ name: "softmax", attrs: { dim: 1 } }, { name: "softmax", attrs: { dim: 0 } }), false);
  assert.equal(_sameParams({ value: NaN }, { value: NaN }), true);
});
