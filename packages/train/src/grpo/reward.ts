// The GSM8K rule-based reward (VeRL's reward_score/gsm8k.py, strict format): the answer is the number
// after the last "#### " in the response's final 300 characters, commas and dollar signs removed; it
// scores 1 when it equals the ground truth, formatScore (0) when it does not, and 0 when there is none.

const CLIP_CHARS = 300;
const STRICT = /#### (-?[0-9.,]+)/g;

/** The final answer of a GSM8K-style solution, or null when it has none in the strict format. */
export function extractAnswer(solution: string): string | null {
  const tail = solution.length > CLIP_CHARS ? solution.slice(-CLIP_CHARS) : solution;
  const all = [...tail.matchAll(STRICT)];
  if (!all.length) return null;
  return all[all.length - 1]![1]!.replace(/,/g, "").replace(/\$/g, "");
}

export function gsm8kScore(solution: string, groundTruth: string, o: { formatScore?: number; score?: number } = {}): number {
  const a = extractAnswer(solution);
  if (a === null) return 0;
  return a === groundTruth ? (o.score ?? 1) : (o.formatScore ?? 0);
}
