// A request's prompt token ids, as the replica will see them: for the precise prefix scorer (its block
// hashes are over token ids) and the P/D decider (uncached length in tokens). From a local model folder
// (torchts/transformers' tokenizer and chat template, as torchts serve tokenizes) or, failing that, the
// replica's own POST /tokenize (vLLM has it too). null when neither can say: scorers then fall back.
import type { Pool } from "./pool.js";
import { contentText, type Body } from "./request_info.js";
import { request } from "./upstream.js";

interface LocalTokenizer {
  encode(text: string, o?: { addSpecialTokens?: boolean }): number[];
  applyChatTemplate(messages: { role: string; content: string }[], o: Record<string, unknown>): number[] | string;
  config: { chat_template?: unknown };
}

export class TokenSource {
  private tok: LocalTokenizer | null = null;

  private constructor(
    private readonly pool: Pool,
    private readonly remote: boolean,
  ) {}

  static async create(pool: Pool, model: string | undefined, remote: boolean): Promise<TokenSource> {
    const t = new TokenSource(pool, remote);
    if (model) {
      const { AutoTokenizer } = await import("torchts/transformers");
      t.tok = (await AutoTokenizer.fromPretrained(model)) as unknown as LocalTokenizer;
    }
    return t;
  }

  get enabled(): boolean {
    return this.tok !== null || this.remote;
  }

  /** Token ids of the (first) prompt of a chat or completions body, or null. */
  async ids(body: Body, signal?: AbortSignal): Promise<number[] | null> {
    const p = body.prompt;
    if (Array.isArray(p) && p.length) {
      if (p.every((x) => Number.isInteger(x))) return p as number[];
      if (Array.isArray(p[0]) && (p[0] as unknown[]).every((x) => Number.isInteger(x))) return p[0] as number[];
    }
    const prompt = typeof p === "string" ? p : Array.isArray(p) && typeof p[0] === "string" ? (p[0] as string) : null;
    const messages = Array.isArray(body.messages) ? (body.messages as Body[]) : null;
    if (prompt === null && !messages) return null;
    const local = this.local(prompt, messages, body);
    if (local) return local;
    return this.remote ? this.viaReplica(prompt, messages, body, signal) : null;
  }

  private local(prompt: string | null, messages: Body[] | null, body: Body): number[] | null {
    const tok = this.tok;
    if (!tok) return null;
    try {
      if (prompt !== null) return tok.encode(prompt);
      // without a chat template the replica's own fallback applies: only it knows those ids
      if (tok.config.chat_template === undefined || tok.config.chat_template === null) return null;
      const ms = messages!.map((m) => ({ ...m, role: String(m.role), content: contentText(m.content) }));
      const ids = tok.applyChatTemplate(ms, {
        addGenerationPrompt: typeof body.add_generation_prompt === "boolean" ? body.add_generation_prompt : true,
        tokenize: true,
        ...(Array.isArray(body.tools) && body.tools.length ? { tools: body.tools } : {}),
      });
      return Array.isArray(ids) ? ids : null;
    } catch {
      return null;
    }
  }

  private async viaReplica(prompt: string | null, messages: Body[] | null, body: Body, signal?: AbortSignal): Promise<number[] | null> {
    const r = this.pool.replicas.find((x) => x.healthy);
    if (!r) return null;
    const req: Body = prompt !== null ? { prompt } : { messages, add_generation_prompt: body.add_generation_prompt ?? true };
    if (typeof body.model === "string") req.model = body.model;
    try {
      const res = await request(r, "POST", "/tokenize", Buffer.from(JSON.stringify(req)), { "content-type": "application/json" }, 2000, signal);
      if (res.status !== 200) return null;
      const j = JSON.parse(res.body.toString("utf8")) as { tokens?: unknown };
      return Array.isArray(j.tokens) && j.tokens.every((x) => Number.isInteger(x)) ? (j.tokens as number[]) : null;
    } catch {
      return null;
    }
  }
}
