// Shared by the robustness tests (fuzz, overload, metrics, disconnect, leak): the OpenAI error-shape
// check, /metrics read through a Prometheus text parser, and raw HTTP on a socket (for requests that
// fetch() refuses to send).
import assert from "node:assert/strict";
import net from "node:net";
import parsePrometheusTextFormat from "parse-prometheus-text-format";

/** Asserts `text` is OpenAI's error body for `status`: {"error":{"message","type","param","code"}}. */
export function assertOpenAIError(status: number, text: string, what = ""): void {
  let e: { message?: unknown; type?: unknown; param?: unknown; code?: unknown } | undefined;
  try {
    e = (JSON.parse(text) as { error?: typeof e }).error;
  } catch {
    assert.fail(`${what}: ${status} with a body that is not JSON: ${JSON.stringify(text.slice(0, 300))}`);
  }
  assert.ok(e && typeof e === "object", `${what}: ${status} without an error object: ${text.slice(0, 300)}`);
  assert.equal(typeof e.message, "string", `${what}: ${text.slice(0, 300)}`);
  assert.equal(typeof e.type, "string", `${what}: ${text.slice(0, 300)}`);
  assert.ok("param" in e && (e.param === null || typeof e.param === "string"), `${what}: ${text.slice(0, 300)}`);
  assert.equal(e.code, status, `${what}: ${text.slice(0, 300)}`);
}

export interface Sample {
  value?: string;
  labels?: Record<string, string>;
  buckets?: Record<string, string>;
  count?: string;
  sum?: string;
}
export interface Family {
  name: string;
  type: string;
  metrics: Sample[];
}
export interface Metrics {
  /** The exposition as the parser reads it. */
  families: Family[];
  /**
   * The same text with the histograms' TYPE lines dropped, so each histogram reads as its
   * _bucket/_sum/_count series: the parser drops _sum, _count and every label of a histogram whose
   * series carry a label besides le (yunyu/parse-prometheus-text-format#13), and ours carry model_name.
   */
  series: Family[];
}

/** GET /metrics, parsed by parse-prometheus-text-format. */
export async function scrape(url: string): Promise<Metrics> {
  const r = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(10_000) });
  assert.equal(r.status, 200);
  assert.match(r.headers.get("content-type") ?? "", /^text\/plain/);
  const text = await r.text();
  return {
    families: parsePrometheusTextFormat(text) as Family[],
    series: parsePrometheusTextFormat(text.replace(/^# TYPE \S+ histogram\n/gm, "")) as Family[],
  };
}

export function family(m: Metrics, name: string, from: "families" | "series" = "families"): Family {
  const f = m[from].find((x) => x.name === name);
  assert.ok(f, `${name} is not in /metrics (${m[from].map((x) => x.name).join(", ")})`);
  return f;
}

/** The value of a counter or gauge sample whose labels include `labels`. */
export function sampleValue(m: Metrics, name: string, labels: Record<string, string> = {}, from: "families" | "series" = "families"): number {
  const f = family(m, name, from);
  const s = f.metrics.find((x) => Object.entries(labels).every(([k, v]) => x.labels?.[k] === v));
  assert.ok(s && s.value !== undefined, `${name}${JSON.stringify(labels)} has no sample`);
  return Number(s.value);
}

/** A histogram's count, sum and cumulative buckets (by le), read from its series. */
export function histogram(m: Metrics, name: string): { count: number; sum: number; buckets: Record<string, number> } {
  assert.equal(family(m, name).type, "HISTOGRAM", name);
  const buckets = Object.fromEntries(family(m, `${name}_bucket`, "series").metrics.map((s) => [s.labels!.le!, Number(s.value)]));
  return { count: sampleValue(m, `${name}_count`, {}, "series"), sum: sampleValue(m, `${name}_sum`, {}, "series"), buckets };
}

export interface RawReply {
  /** The status of the first response (0 when none came). */
  status: number;
  head: string;
  body: string;
}

/** Write `data` on a fresh connection to 127.0.0.1:port and read until the server closes it or `ms` pass. */
export function rawHttp(port: number, data: string | Buffer, ms = 5000): Promise<RawReply> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      let text = Buffer.concat(chunks).toString("latin1");
      // a 100 Continue comes before the real answer
      while (/^HTTP\/1\.[01] 100 /.test(text)) text = text.slice(text.indexOf("\r\n\r\n") + 4);
      const end = text.indexOf("\r\n\r\n");
      const head = end >= 0 ? text.slice(0, end) : text;
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
      let body = end >= 0 ? text.slice(end + 4) : "";
      if (/\r\ntransfer-encoding: chunked/i.test(head)) body = unchunk(body);
      resolve({ status, head, body: Buffer.from(body, "latin1").toString("utf8") });
    };
    const timer = setTimeout(finish, ms);
    s.on("data", (d: Buffer) => chunks.push(d));
    s.on("error", finish);
    s.on("close", finish);
    s.write(data);
  });
}

function unchunk(s: string): string {
  let out = "";
  for (let at = 0; at < s.length; ) {
    const eol = s.indexOf("\r\n", at);
    if (eol < 0) break;
    const n = parseInt(s.slice(at, eol), 16);
    if (!(n > 0)) break;
    out += s.slice(eol + 2, eol + 2 + n);
    at = eol + 2 + n + 2;
  }
  return out;
}
