// A locally generated arithmetic word-problem set in GSM8K's format: a question, a worked solution whose
// last line is "#### <answer>", and the answer. Seeded (its own PRNG): the same seed gives the same set.
import { mulberry32 } from "torchts/transformers";

export interface Problem {
  question: string;
  /** The worked solution, ending in "#### <answer>". */
  solution: string;
  /** The ground truth as the scorer compares it (digits, optional minus). */
  answer: string;
}

/** mulberry32 (torchts's seeded host PRNG, uniform in [0, 1)). */
export { mulberry32 };

const NAMES = ["Tom", "Ann", "Sam", "Mia", "Ben", "Eva", "Leo", "Ivy"];
const THINGS = ["apples", "pens", "coins", "books", "cards", "shells"];

type Template = { op: "+" | "-"; text: (n: string, x: string, a: number, b: number) => string };
const TEMPLATES: Template[] = [
  { op: "+", text: (n, x, a, b) => `${n} has ${a} ${x} and gets ${b} more. How many now?` },
  { op: "+", text: (n, x, a, b) => `${n} buys ${a} ${x}, then ${b} more. How many in all?` },
  { op: "-", text: (n, x, a, b) => `${n} has ${a} ${x} and gives away ${b}. How many are left?` },
  { op: "-", text: (n, x, a, b) => `${n} had ${a} ${x} and lost ${b}. How many now?` },
];

/** `count` problems with operands in [0, maxOperand] (subtraction never goes below zero). */
export function arithmeticProblems(count: number, seed: number, maxOperand = 9): Problem[] {
  const rnd = mulberry32(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const out: Problem[] = [];
  for (let i = 0; i < count; i++) {
    const t = pick(TEMPLATES);
    let a = Math.floor(rnd() * (maxOperand + 1));
    let b = Math.floor(rnd() * (maxOperand + 1));
    if (t.op === "-" && b > a) [a, b] = [b, a];
    const c = t.op === "+" ? a + b : a - b;
    out.push({ question: t.text(pick(NAMES), pick(THINGS), a, b), solution: `${a} ${t.op} ${b} = ${c}\n#### ${c}`, answer: String(c) });
  }
  return out;
}

/** The prompt the model completes: the question, then "A: ". */
export function promptOf(p: Problem): string {
  return `Q: ${p.question}\nA: `;
}
