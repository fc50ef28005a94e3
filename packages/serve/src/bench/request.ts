// One streamed request and its client-side timings, as vLLM's benchmark client measures them. The
// clock starts just before the request is sent. A "token chunk" is a streamed choice that carries
// text (or closes the choice with a finish_reason): TTFT is the first one's arrival, each later
// one adds its gap to ITL, and E2EL ends at the last one. Chat's opening chunk (role "assistant",
// empty content) is not one: servers may send it before any token exists. The usage chunk
// (stream_options.include_usage) gives the exact token counts.
import type OpenAI from "openai";
import type { SampleRequest } from "./dataset.js";

export type Endpoint = "/v1/completions" | "/v1/chat/completions";

export interface RequestOutcome {
  success: boolean;
  /** prompt_tokens from usage, else the dataset's count. */
  promptLen: number;
  /** completion_tokens from usage; 0 when the server sent none (metrics then re-tokenize the text). */
  outputTokens: number;
  /** Seconds from send to the first token chunk. */
  ttft: number;
  /** Seconds between consecutive token chunks. */
  itl: number[];
  /** Seconds from send to the last token chunk. */
  latency: number;
  /** Send time in seconds from the benchmark's start. */
  startTime: number;
  /** Seconds spent waiting for a --max-concurrency slot before the send. */
  queueTime: number;
  generatedText: string;
  error: string;
}

export interface RequestSpec {
  endpoint: Endpoint;
  model: string;
  ignoreEos: boolean;
  /** Extra body fields (sampling parameters), sent as given. */
  extraBody?: Record<string, unknown>;
}

interface StreamChunk {
  choices?: { text?: string | null; delta?: { content?: string | null }; finish_reason?: string | null }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
}

function body(spec: RequestSpec, req: SampleRequest): Record<string, unknown> {
  const common = { model: spec.model, stream: true, stream_options: { include_usage: true }, ...(spec.ignoreEos ? { ignore_eos: true } : {}), ...spec.extraBody };
  if (spec.endpoint === "/v1/completions") return { ...common, prompt: req.prompt, max_tokens: req.outputLen };
  // randomRequests() makes text prompts for chat.
  return { ...common, messages: [{ role: "user", content: req.prompt as string }], max_completion_tokens: req.outputLen };
}

/** Send `req` and time its stream; never throws (a failure is an outcome with success false). */
export async function sendRequest(client: OpenAI, spec: RequestSpec, req: SampleRequest, t0: number, signal?: AbortSignal): Promise<RequestOutcome> {
  const out: RequestOutcome = { success: false, promptLen: req.promptLen, outputTokens: 0, ttft: 0, itl: [], latency: 0, startTime: 0, queueTime: 0, generatedText: "", error: "" };
  const payload = body(spec, req);
  const st = performance.now();
  out.startTime = (st - t0) / 1000;
  let last = st;
  let first = true;
  try {
    const stream = await client.post<AsyncIterable<StreamChunk>>(spec.endpoint, { body: payload, stream: true, signal });
    for await (const chunk of stream) {
      const now = performance.now();
      const choice = chunk.choices?.[0];
      if (choice) {
        const text = (spec.endpoint === "/v1/completions" ? choice.text : choice.delta?.content) ?? "";
        if (text || choice.finish_reason) {
          if (first) out.ttft = (now - st) / 1000;
          else out.itl.push((now - last) / 1000);
          first = false;
          last = now;
          out.generatedText += text;
        }
      }
      if (chunk.usage) {
        if (typeof chunk.usage.completion_tokens === "number") out.outputTokens = chunk.usage.completion_tokens;
        if (typeof chunk.usage.prompt_tokens === "number") out.promptLen = chunk.usage.prompt_tokens;
      }
    }
    if (first) out.error = "the stream ended without a token chunk (no TTFT)";
    else out.success = true;
    out.latency = (last - st) / 1000;
  } catch (e) {
    out.error = (e as Error).message || String(e);
  }
  return out;
}
