// The shared-system-prompt workload of the prefix-routing acceptance test and benchmark: `prompts`
// distinct system prompts of about `sysChars` characters (tokens, with the byte tokenizer), each user
// turn a short distinct question, in an order drawn from a seeded generator (so round robin gets no
// accidental affinity from a regular pattern), sent by `concurrency` workers.
import { uniformInt } from "pure-rand/distribution/uniformInt";
import { xoroshiro128plus } from "pure-rand/generator/xoroshiro128plus";

export interface Turn {
  prompt: number;
  body: Record<string, unknown>;
}

export function systemPrompt(k: number, sysChars: number): string {
  const words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"];
  let s = `You are assistant number ${k}. `;
  for (let i = 0; s.length < sysChars; i++) s += `${words[(i * (k + 3) + k) % words.length]} `;
  return s.slice(0, sysChars);
}

export function workload(o: { prompts: number; requests: number; sysChars: number; maxTokens: number; seed: number; salt: string; stream?: boolean }): Turn[] {
  const rng = xoroshiro128plus(o.seed);
  return Array.from({ length: o.requests }, (_, i) => {
    const k = uniformInt(rng, 0, o.prompts - 1);
    return {
      prompt: k,
      body: {
        model: "tiny",
        messages: [
          { role: "system", content: systemPrompt(k, o.sysChars) },
          { role: "user", content: `question ${i}: what is ${i} squared?` },
        ],
        max_tokens: o.maxTokens,
        temperature: 0,
        ignore_eos: true,
        cache_salt: o.salt,
        ...(o.stream ? { stream: true } : {}),
      },
    };
  });
}

export interface Result {
  status: number;
  replica: string | null;
  ttftMs: number;
}

/** Send the turns through `url` with `concurrency` workers; streams time their first content chunk. */
export async function run(url: string, turns: Turn[], concurrency: number, timeoutMs = 60_000): Promise<Result[]> {
  const out: Result[] = new Array(turns.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < turns.length; i = next++) {
      const t0 = performance.now();
      const r = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(turns[i]!.body), signal: AbortSignal.timeout(timeoutMs) });
      let ttft = NaN;
      if (turns[i]!.body.stream && r.body) {
        const dec = new TextDecoder();
        let buf = "";
        for await (const c of r.body as unknown as AsyncIterable<Uint8Array>) {
          buf += dec.decode(c, { stream: true });
          if (Number.isNaN(ttft) && /"content":"[^"]/.test(buf)) ttft = performance.now() - t0;
        }
      } else await r.text();
      out[i] = { status: r.status, replica: r.headers.get("x-torchts-replica"), ttftMs: ttft };
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return out;
}

export const percentile = (xs: number[], p: number) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : NaN;
};
