// Reads a proxied SSE stream (after its bytes went to the client) for the router's TTFT and TPOT:
// the first event carrying generated content (a role-only first chunk does not count, as in
// `vllm bench serve`), the last one, and the completion token count (usage when the stream has it,
// else one token per content chunk).
import { createParser, type EventSourceParser } from "eventsource-parser";

type Chunk = { choices?: { delta?: { content?: unknown; tool_calls?: unknown; reasoning_content?: unknown }; text?: unknown }[]; usage?: { completion_tokens?: unknown } | null };

export class StreamObserver {
  firstTokenAt: number | null = null;
  lastTokenAt: number | null = null;
  contentEvents = 0;
  usageTokens: number | null = null;
  private readonly parser: EventSourceParser;
  private readonly dec = new TextDecoder();

  constructor() {
    this.parser = createParser({ onEvent: (e) => this.event(e.data) });
  }

  feed(chunk: Buffer): void {
    this.parser.feed(this.dec.decode(chunk, { stream: true }));
  }

  private event(data: string): void {
    if (data === "[DONE]") return;
    let c: Chunk;
    try {
      c = JSON.parse(data) as Chunk;
    } catch {
      return;
    }
    const has = (v: unknown) => (typeof v === "string" ? v.length > 0 : v !== undefined && v !== null);
    if (c.choices?.some((ch) => has(ch.text) || has(ch.delta?.content) || has(ch.delta?.tool_calls) || has(ch.delta?.reasoning_content))) {
      const now = performance.now();
      this.firstTokenAt ??= now;
      this.lastTokenAt = now;
      this.contentEvents++;
    }
    if (c.usage && Number.isInteger(c.usage.completion_tokens)) this.usageTokens = c.usage.completion_tokens as number;
  }

  get tokens(): number {
    return this.usageTokens ?? this.contentEvents;
  }
}
