// A synthetic click dataset with a learnable signal: dense features plus one multi-hot bag of
// ids per categorical table. The true click logit is linear in the dense features, adds a
// per-id effect for every id, and a dot product between the latent vectors of tables 0 and 1
// (a feature interaction, which DLRM's dot-interaction layer can represent).
import { mulberry32 } from "../common/train_utils.js";

export interface ClickData {
  dense: Float32Array; // [n, nDense]
  sparse: number[][]; // per table: [n * bag] ids
  labels: Float32Array; // [n] in {0, 1}
  /** The true click probabilities (for the Bayes-optimal AUC). */
  probs: Float32Array;
}

function gauss(r: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
}

export function makeClicks(n: number, nDense: number, tables: number[], bag: number, seed: number): ClickData {
  // the ground truth comes from a fixed seed: train and test sets share it
  const g = mulberry32(777);
  const wDense = Array.from({ length: nDense }, () => gauss(g) * 0.6);
  const effect = tables.map((rows) => Array.from({ length: rows }, () => gauss(g) * 0.8));
  const latent = tables.slice(0, 2).map((rows) => Array.from({ length: rows }, () => [gauss(g), gauss(g), gauss(g)]));
  const r = mulberry32(seed);
  const dense = new Float32Array(n * nDense);
  const sparse = tables.map(() => [] as number[]);
  const labels = new Float32Array(n);
  const probs = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let z = -0.5;
    for (let j = 0; j < nDense; j++) {
      const v = gauss(r);
      dense[i * nDense + j] = v;
      z += wDense[j]! * v;
    }
    const first: number[] = [];
    tables.forEach((rows, t) => {
      for (let b = 0; b < bag; b++) {
        // skewed popularity, like real categorical features
        const id = Math.min(rows - 1, Math.floor(rows * r() ** 2));
        sparse[t]!.push(id);
        z += effect[t]![id]! / bag;
        if (b === 0) first.push(id);
      }
    });
    const a = latent[0]![first[0]!]!;
    const b = latent[1]![first[1]!]!;
    z += 0.7 * (a[0]! * b[0]! + a[1]! * b[1]! + a[2]! * b[2]!);
    const p = 1 / (1 + Math.exp(-z));
    probs[i] = p;
    labels[i] = r() < p ? 1 : 0;
  }
  return { dense, sparse, labels, probs };
}

/** Area under the ROC curve (ties count half), by ranking. */
export function auc(scores: ArrayLike<number>, labels: ArrayLike<number>): number {
  const idx = Array.from({ length: scores.length }, (_, i) => i).sort((a, b) => scores[a]! - scores[b]!);
  let rankSum = 0;
  let pos = 0;
  for (let i = 0; i < idx.length; ) {
    let j = i;
    while (j + 1 < idx.length && scores[idx[j + 1]!] === scores[idx[i]!]) j++;
    const avg = (i + j) / 2 + 1;
    for (let k = i; k <= j; k++)
      if (labels[idx[k]!]) {
        rankSum += avg;
        pos++;
      }
    i = j + 1;
  }
  const neg = idx.length - pos;
  if (pos === 0 || neg === 0) return NaN;
  return (rankSum - (pos * (pos + 1)) / 2) / (pos * neg);
}
