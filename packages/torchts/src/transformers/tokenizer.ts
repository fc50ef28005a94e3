// AutoTokenizer: tokenizer.json through @huggingface/tokenizers and chat templates through
// @huggingface/jinja, with the render context transformers uses (messages, tools, documents,
// add_generation_prompt and the special tokens: bos_token, eos_token, ...).
import { Tokenizer } from "@huggingface/tokenizers";
import { Template } from "@huggingface/jinja";

export interface ChatMessage {
  role: string;
  content: string | unknown;
  [k: string]: unknown;
}

export interface ApplyChatTemplateOptions {
  addGenerationPrompt?: boolean;
  /** Return token ids instead of text (encoded without adding special tokens, as transformers does). */
  tokenize?: boolean;
  tools?: unknown[];
  documents?: unknown[];
  /** A template to use instead of the tokenizer's. */
  chatTemplate?: string;
  /** Extra variables for the template (e.g. enable_thinking). */
  [k: string]: unknown;
}

const SPECIAL = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"] as const;

type Raw = Record<string, unknown>;

function tokenContent(v: unknown): string | null {
  if (typeof v === "string") return v;
  if (v && typeof v === "object" && typeof (v as Raw).content === "string") return (v as Raw).content as string;
  return null;
}

export class PreTrainedTokenizer {
  readonly tokenizer: Tokenizer;
  readonly specialTokens: Record<string, string | null> = {};
  private readonly templates = new Map<string, Template>();

  constructor(
    readonly tokenizerJson: Raw,
    readonly config: Raw = {},
  ) {
    this.tokenizer = new Tokenizer(tokenizerJson, config);
    for (const k of SPECIAL) this.specialTokens[k] = tokenContent(config[k]);
  }

  /** Reads dir/tokenizer.json, dir/tokenizer_config.json and (when present) dir/chat_template.jinja. */
  static async fromPretrained(dir: string): Promise<PreTrainedTokenizer> {
    const fs = await import("node:fs/promises");
    const path = await import("node:path");
    const read = async (f: string): Promise<string | null> => {
      try {
        return await fs.readFile(path.join(dir, f), "utf8");
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
        throw e;
      }
    };
    const tj = await read("tokenizer.json");
    if (tj === null) throw new Error(`AutoTokenizer.fromPretrained: ${path.join(dir, "tokenizer.json")} not found`);
    const config = JSON.parse((await read("tokenizer_config.json")) ?? "{}") as Raw;
    const jinja = await read("chat_template.jinja");
    if (jinja !== null && config.chat_template === undefined) config.chat_template = jinja;
    return new PreTrainedTokenizer(JSON.parse(tj) as Raw, config);
  }

  private id(tok: string | null): number | null {
    return tok === null ? null : (this.tokenizer.token_to_id(tok) ?? null);
  }
  get eosTokenId(): number | null {
    return this.id(this.specialTokens.eos_token ?? null);
  }
  get bosTokenId(): number | null {
    return this.id(this.specialTokens.bos_token ?? null);
  }
  get padTokenId(): number | null {
    return this.id(this.specialTokens.pad_token ?? null);
  }
  get vocabSize(): number {
    return this.tokenizer.get_vocab(true).size;
  }

  encode(text: string, opts: { addSpecialTokens?: boolean } = {}): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: opts.addSpecialTokens ?? true }).ids;
  }
  /**
   * Text of `ids`. cleanUpTokenizationSpaces (default: the tokenizer config's, true when unset, as
   * transformers) removes spaces before punctuation; incremental decoding turns it off (vLLM does), since
   * it rewrites text already streamed.
   */
  decode(ids: number[], opts: { skipSpecialTokens?: boolean; cleanUpTokenizationSpaces?: boolean } = {}): string {
    if (ids.length === 0) return ""; // as transformers; the tokenizers library refuses an empty list
    const o: { skip_special_tokens: boolean; clean_up_tokenization_spaces?: boolean } = { skip_special_tokens: opts.skipSpecialTokens ?? false };
    if (opts.cleanUpTokenizationSpaces !== undefined) o.clean_up_tokenization_spaces = opts.cleanUpTokenizationSpaces;
    return this.tokenizer.decode(ids, o);
  }
  tokenize(text: string, opts: { addSpecialTokens?: boolean } = {}): string[] {
    return this.tokenizer.tokenize(text, { add_special_tokens: opts.addSpecialTokens ?? false });
  }
  tokenToId(token: string): number | undefined {
    return this.tokenizer.token_to_id(token);
  }
  idToToken(id: number): string | undefined {
    return this.tokenizer.id_to_token(id);
  }

  /** The template source: a string, or the named entry ("tool_use" when tools are given, else "default"). */
  private templateSource(opts: ApplyChatTemplateOptions): string {
    if (typeof opts.chatTemplate === "string") return opts.chatTemplate;
    const t = this.config.chat_template;
    if (typeof t === "string") return t;
    if (Array.isArray(t)) {
      const named = new Map((t as { name: string; template: string }[]).map((e) => [e.name, e.template]));
      const pick = opts.tools && named.has("tool_use") ? "tool_use" : "default";
      const s = named.get(pick);
      if (s) return s;
    }
    throw new Error("applyChatTemplate: this tokenizer has no chat_template (tokenizer_config.json or chat_template.jinja); pass opts.chatTemplate");
  }

  applyChatTemplate(messages: ChatMessage[], opts: ApplyChatTemplateOptions & { tokenize: true }): number[];
  applyChatTemplate(messages: ChatMessage[], opts?: ApplyChatTemplateOptions): string;
  applyChatTemplate(messages: ChatMessage[], opts: ApplyChatTemplateOptions = {}): string | number[] {
    const src = this.templateSource(opts);
    let tpl = this.templates.get(src);
    if (!tpl) this.templates.set(src, (tpl = new Template(src)));
    const { addGenerationPrompt, tokenize, tools, documents, chatTemplate: _ignored, ...extra } = opts;
    const special: Record<string, string> = {};
    for (const [k, v] of Object.entries(this.specialTokens)) if (v !== null) special[k] = v;
    const text = tpl.render({
      messages,
      add_generation_prompt: addGenerationPrompt ?? false,
      tools,
      documents,
      ...special,
      ...extra,
    });
    return tokenize ? this.encode(text, { addSpecialTokens: false }) : text;
  }
}

export const AutoTokenizer = {
  fromPretrained: (dir: string): Promise<PreTrainedTokenizer> => PreTrainedTokenizer.fromPretrained(dir),
};
