// What the router reads from an OpenAI request to route it. The body is whatever a client sent: every
// field is checked before use, and anything odd is left for the replica to refuse (the router forwards
// the bytes it got; it never rewrites a request it did not have to).
import { createHash } from "node:crypto";

export type Body = Record<string, unknown>;

export class RequestError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

export interface RouteInfo {
  path: string;
  body: Body;
  /** The prompt as prefix-preserving text: a longer conversation's text starts with the shorter one's. */
  text: string;
  model: string;
  salt: string;
  stream: boolean;
  /** Session: the replica named by the session-token header, and the `user` field. */
  sessionReplica: string | null;
  user: string | null;
  priority: number;
  tenant: string;
  /** A stable hash of what identifies the request's routing (tie-breaks), the same on every router. */
  key: string;
}

function partText(p: unknown): string {
  if (p && typeof p === "object" && (p as Body).type === "text" && typeof (p as Body).text === "string") return (p as Body).text as string;
  return JSON.stringify(p) ?? "";
}

export function contentText(c: unknown): string {
  if (typeof c === "string") return c;
  if (Array.isArray(c)) return c.map(partText).join("");
  return c === null || c === undefined ? "" : JSON.stringify(c);
}

/** The routing text of a chat or completions body ("" when there is no usable prompt: the replica will say why). */
export function promptText(body: Body): string {
  if (Array.isArray(body.messages)) {
    return body.messages
      .map((m) => (m && typeof m === "object" ? `\u0000${String((m as Body).role)}\u0001${contentText((m as Body).content)}` : ""))
      .join("");
  }
  const p = body.prompt;
  if (typeof p === "string") return p;
  if (Array.isArray(p) && p.length) {
    // several prompts: route by the first; token ids as decimal text, each id closed by a comma
    const first = p[0];
    if (typeof first === "string") return first;
    if (typeof first === "number") return p.map(String).join(",") + ",";
    if (Array.isArray(first)) return first.map(String).join(",") + ",";
  }
  return "";
}

export function sessionToken(replicaId: string): string {
  return Buffer.from(replicaId, "utf8").toString("base64url");
}

export function sessionReplica(token: string | undefined): string | null {
  if (!token || token.length > 512) return null;
  const id = Buffer.from(token, "base64url").toString("utf8");
  return /^[A-Za-z0-9._:\-[\]]+$/.test(id) ? id : null;
}

export function stableHash(s: string): string {
  return createHash("sha1").update(s).digest("hex");
}

export interface InfoOptions {
  priorityHeader: string;
  fairnessHeader: string;
  sessionHeader: string;
}

const header = (h: Record<string, string | string[] | undefined>, name: string): string | undefined => {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
};

/** Read the routing fields of a parsed JSON body; throws RequestError for what the router itself needs and cannot use. */
export function routeInfo(path: string, body: unknown, headers: Record<string, string | string[] | undefined>, o: InfoOptions): RouteInfo {
  if (!body || typeof body !== "object" || Array.isArray(body)) throw new RequestError(400, "the request body must be a JSON object", null);
  const b = body as Body;
  const text = promptText(b);
  const model = typeof b.model === "string" ? b.model : "";
  const salt = typeof b.cache_salt === "string" ? b.cache_salt : "";
  let priority = 0;
  const ph = header(headers, o.priorityHeader);
  if (ph !== undefined) {
    if (!/^-?\d{1,9}$/.test(ph.trim())) throw new RequestError(400, `header ${o.priorityHeader} must be an integer, got '${ph.slice(0, 64)}'`, o.priorityHeader);
    priority = Number(ph.trim());
  } else if (Number.isSafeInteger(b.priority)) priority = Math.max(-(2 ** 31), Math.min(2 ** 31 - 1, b.priority as number));
  const tenant = (header(headers, o.fairnessHeader) ?? "").slice(0, 256);
  const user = typeof b.user === "string" && b.user ? b.user.slice(0, 1024) : null;
  const sess = sessionReplica(header(headers, o.sessionHeader));
  // the same request gets the same key everywhere: its session, else its prompt's start, under its salt
  const key = stableHash(`${salt}\u0000${user ?? text.slice(0, 256)}`);
  return { path, body: b, text, model, salt, stream: b.stream === true, sessionReplica: sess, user, priority, tenant, key };
}
