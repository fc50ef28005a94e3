// `torchts router`: an OpenAI-compatible front (fastify) over a pool of replicas. A completion request is
// read for its routing fields, waits in flow control until a replica has room, is scheduled (filters ->
// weighted scorers -> picker; P/D decider), and is proxied; the response streams back byte for byte.
// Other routes (/v1/models, /tokenize, /detokenize) go to any healthy replica.
import { EventEmitter } from "node:events";
import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import type { RouterConfig } from "./config.js";
import { Cancelled, FlowController, Rejected } from "./flow_control.js";
import { hostKeys, noKeys } from "./keys.js";
import { Discovery } from "./discovery.js";
import { KvEventSubscriber } from "./kv_events.js";
import { buildMetrics, type RouterMetrics } from "./metrics.js";
import { decodeRequest, runPrefill } from "./pd.js";
import { Pool, type Replica } from "./pool.js";
import { forward, upstreamHeaders, type Outcome } from "./proxy.js";
import { RequestError, routeInfo, sessionToken, type RouteInfo } from "./request_info.js";
import { Scheduler, type Hashes, type PickInput, type Scored } from "./scheduler.js";
import { TokenSource } from "./tokens.js";

/** What the router decided for one request (also the answer of a dry run). */
export interface Plan {
  decode: Replica;
  prefill: Replica | null;
  /** decode-only (P/D off, or the prompt is short / mostly cached), prefill-decode. */
  decision: "decode-only" | "prefill-decode" | null;
  uncachedTokens: number;
  ranked: Scored[];
}

/** One dispatch, as the `dispatch` event reports it (tests and logs). */
export interface Dispatch {
  path: string;
  replica: string;
  prefill: string | null;
  tenant: string;
  priority: number;
  key: string;
  attempt: number;
}

export interface Router {
  app: FastifyInstance;
  config: RouterConfig;
  pool: Pool;
  scheduler: Scheduler;
  flow: FlowController<Plan>;
  metrics: RouterMetrics;
  /** Emits "dispatch" (Dispatch) for every request sent to a replica. */
  events: EventEmitter;
  /** Listen on config.server (or the given port); resolves with the URL. */
  listen(port?: number): Promise<string>;
  /** Stop taking requests, let those in flight finish, stop scraping. */
  close(): Promise<void>;
}

type Parsed = { raw: Buffer; json: unknown };
type ErrType = "invalid_request_error" | "not_found_error" | "rate_limit_error" | "service_unavailable_error" | "upstream_error" | "internal_error";

function errorBody(status: number, message: string, type: ErrType, param: string | null = null) {
  return { error: { message, type, param, code: status } };
}

const COMPLETION_ROUTES = ["/v1/chat/completions", "/v1/completions"];
/** The header that asks for the plan instead of the answer (the endpoint picker's view, for HA checks and debugging). */
export const DRY_RUN_HEADER = "x-torchts-dry-run";

export async function createRouter(cfg: RouterConfig, o: { logger?: boolean } = {}): Promise<Router> {
  const pool = new Pool(cfg);
  const precise = cfg.scheduling.scorers.some((s) => s.type === "precise-prefix-cache");
  const keys = precise ? await hostKeys() : noKeys;
  const scheduler = new Scheduler(cfg, pool, keys);
  const tokens = await TokenSource.create(pool, cfg.tokenizer.model, cfg.tokenizer.remote);
  const needTokens = tokens.enabled && (precise || cfg.disaggregation.enabled);
  const metrics = buildMetrics(pool, scheduler, (id) => pool.isStale(pool.get(id)!));
  const events = new EventEmitter();
  const fc = cfg.flowControl;
  const decoders = () => pool.replicas.filter((r) => r.healthy && r.canDecode());
  const flow = new FlowController<Plan>(
    { maxQueued: fc.maxQueued, queueTimeoutMs: fc.queueTimeoutMs },
    () => decoders().every((r) => scheduler.saturated(r)),
    // an emptied queue drops its label set: tenants are client-chosen, their number unbounded
    (band, tenant, depth) => (depth ? metrics.queueDepth.set({ band: String(band), tenant }, depth) : metrics.queueDepth.remove({ band: String(band), tenant })),
  );
  pool.on("update", () => flow.pump());
  pool.on("down", (r: Replica) => scheduler.forget(r));
  const kv = cfg.kvEvents.enabled ? new KvEventSubscriber(pool, scheduler.precise, cfg.kvEvents.reconnectMs) : null;
  const infoOpts = { priorityHeader: fc.priorityHeader, fairnessHeader: fc.fairnessHeader, sessionHeader: cfg.session.header };
  const routerHeaders = new Set([fc.priorityHeader, fc.fairnessHeader, cfg.session.header, DRY_RUN_HEADER]);

  /** Schedule `input` over the replicas with room (none in `exclude`); null when none can take it. */
  const plan = (input: PickInput, memo: Hashes, exclude: ReadonlySet<string>): Plan | null => {
    const free = (r: Replica) => scheduler.hasRoom(r) && !exclude.has(r.id);
    const pick = scheduler.pick(input, pool.replicas.filter((r) => r.canDecode() && free(r)), memo);
    if (!pick) return null;
    const decode = pick.replica;
    let prefill: Replica | null = null;
    let decision: Plan["decision"] = null;
    let uncached = 0;
    if (cfg.disaggregation.enabled) {
      uncached = Math.max(0, scheduler.promptTokens(input) - scheduler.cachedTokens(input, decode, memo));
      decision = "decode-only";
      if (uncached >= cfg.disaggregation.uncachedTokensThreshold) {
        const p = scheduler.pick(input, pool.replicas.filter((r) => r !== decode && r.canPrefill() && free(r)), memo);
        if (p) [prefill, decision] = [p.replica, "prefill-decode"];
      }
    }
    return { decode, prefill, decision, uncachedTokens: uncached, ranked: pick.ranked };
  };

  /** Count the plan's requests at dispatch (load is known before any scrape shows it) and index its prompt. */
  const commit = (p: Plan, input: PickInput, memo: Hashes, attempt: number): Plan => {
    p.decode.inFlight++;
    if (p.prefill) p.prefill.inFlight++;
    scheduler.account(input, p.prefill ?? p.decode, memo);
    scheduler.routed(input, p.decode, memo);
    if (p.prefill) scheduler.routed(input, p.prefill, memo);
    metrics.picks.inc({ replica: p.decode.id, role: "decode" });
    if (p.prefill) metrics.picks.inc({ replica: p.prefill.id, role: "prefill" });
    const i = input.info;
    events.emit("dispatch", { path: i.path, replica: p.decode.id, prefill: p.prefill?.id ?? null, tenant: i.tenant, priority: i.priority, key: i.key, attempt } satisfies Dispatch);
    return p;
  };

  const release = (r: Replica | null) => {
    if (!r) return;
    r.inFlight--;
    flow.pump();
  };

  const app = Fastify({ logger: o.logger ?? false, bodyLimit: cfg.server.bodyLimit, forceCloseConnections: "idle", http: { requireHostHeader: false } });
  // JSON only (anything else is 415), kept as the bytes received: they are what the replica gets
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (_req, body: Buffer, done) => {
    try {
      done(null, { raw: body, json: JSON.parse(body.toString("utf8")) } satisfies Parsed);
    } catch (e) {
      done(new RequestError(400, `the body is not valid JSON: ${(e as Error).message}`, null) as unknown as FastifyError, undefined);
    }
  });
  app.addHook("onRequest", async (req) => {
    (req as FastifyRequest & { arrivedAt: number }).arrivedAt = performance.now();
  });
  app.setErrorHandler((err: FastifyError | RequestError, _req, reply) => {
    if (err instanceof RequestError) return reply.code(err.status).send(errorBody(err.status, err.message, "invalid_request_error", err.param));
    const status = (err as FastifyError).statusCode && (err as FastifyError).statusCode! < 500 ? (err as FastifyError).statusCode! : 500;
    return reply.code(status).send(errorBody(status, err.message, status === 404 ? "not_found_error" : status < 500 ? "invalid_request_error" : "internal_error"));
  });
  app.setNotFoundHandler((req, reply) => reply.code(404).send(errorBody(404, `no route ${req.method} ${req.url.split("?")[0]}`, "not_found_error")));

  const reject = (reply: FastifyReply, path: string, status: number, reason: string, message: string, type: ErrType) => {
    metrics.rejected.inc({ reason });
    metrics.requests.inc({ path, code: String(status) });
    const headers: Record<string, string> = { "x-llm-d-request-dropped-reason": reason };
    if (status === 429 || status === 503) headers["retry-after"] = "1";
    return reply.code(status).headers(headers).send(errorBody(status, message, type));
  };

  const clientSignal = (res: ServerResponse) => {
    const ac = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) ac.abort();
    });
    return ac;
  };

  const completion = async (path: string, req: FastifyRequest, reply: FastifyReply) => {
    const arrived = (req as FastifyRequest & { arrivedAt: number }).arrivedAt;
    const parsed = req.body as Parsed | undefined;
    if (!parsed || typeof parsed !== "object" || !("raw" in parsed)) throw new RequestError(400, "send the request as a JSON body (content-type: application/json)");
    const info: RouteInfo = routeInfo(path, parsed.json, req.headers, infoOpts);
    const ac = clientSignal(reply.raw);
    const ids = needTokens ? await tokens.ids(info.body, ac.signal) : null;
    const input: PickInput = { info, tokens: ids };
    const memo = scheduler.memo(input);

    if (req.headers[DRY_RUN_HEADER] !== undefined) {
      const p = plan(input, memo, new Set());
      return reply.send({
        replica: p?.decode.id ?? null,
        prefill: p?.prefill?.id ?? null,
        decision: p?.decision ?? null,
        uncached_tokens: p?.uncachedTokens ?? null,
        scores: p?.ranked.map((s) => ({ replica: s.replica.id, total: s.total, ...s.scores })) ?? [],
      });
    }

    reply.hijack();
    const res = reply.raw;
    const tried = new Set<string>();
    const headers = upstreamHeaders(req.headers as IncomingHttpHeaders, routerHeaders);
    const answer = (status: number, reason: string, message: string, type: ErrType) => {
      metrics.rejected.inc({ reason });
      metrics.requests.inc({ path, code: String(status) });
      if (res.headersSent || res.destroyed) return;
      const h: Record<string, string> = { "content-type": "application/json; charset=utf-8", "x-llm-d-request-dropped-reason": reason };
      if (status === 429 || status === 503) h["retry-after"] = "1";
      res.writeHead(status, h);
      res.end(JSON.stringify(errorBody(status, message, type)));
    };
    for (let attempt = 0; ; attempt++) {
      // nothing to wait for: GIE's endpoint picker answers 503 when no endpoint is ready
      if (!decoders().length) return answer(503, "no-healthy-replica", "no healthy replica can serve the request", "service_unavailable_error");
      const queuedAt = performance.now();
      let p: Plan;
      try {
        p = await flow.admit(info.priority, info.tenant, () => {
          const x = plan(input, memo, tried);
          return x && commit(x, input, memo, attempt);
        }, ac.signal);
      } catch (e) {
        if (e instanceof Cancelled) return;
        if (e instanceof Rejected) return answer(e.status, e.reason, e.message, e.status === 429 ? "rate_limit_error" : "service_unavailable_error");
        throw e;
      }
      const waited = performance.now() - queuedAt;
      if (attempt === 0) metrics.queueTime.observe(waited / 1000);
      let body = parsed.raw;
      if (p.prefill) {
        const pre = await runPrefill(p.prefill, path, info.body, headers, cfg.disaggregation.prefillTimeoutMs, ac.signal);
        release(p.prefill);
        if (pre.ok) {
          body = Buffer.from(JSON.stringify(decodeRequest(info.body, pre.params)));
          metrics.disagg.inc({ decision_type: "prefill-decode" });
        } else {
          if (pre.refused) pool.down(p.prefill, "refused");
          metrics.disagg.inc({ decision_type: "prefill-fallback" });
        }
      } else if (p.decision) metrics.disagg.inc({ decision_type: p.decision });
      if (ac.signal.aborted) return release(p.decode);
      const extra: Record<string, string> = { "x-torchts-replica": p.decode.id, [cfg.session.header]: sessionToken(p.decode.id) };
      if (p.prefill) extra["x-torchts-prefill-replica"] = p.prefill.id;
      const out: Outcome = await forward({
        replica: p.decode,
        method: "POST",
        path,
        headers,
        body,
        res,
        extra,
        clientGone: ac.signal,
        timeoutMs: cfg.proxy.requestTimeoutMs,
        retry503: attempt < cfg.proxy.retries,
        observe: info.stream,
        onSent: () => {
          if (attempt === 0) metrics.overhead.observe(Math.max(0, performance.now() - arrived - waited) / 1000);
        },
      });
      release(p.decode);
      if (out.kind === "retry" && attempt < cfg.proxy.retries && !ac.signal.aborted) {
        pool.failed(p.decode, out.error);
        if (out.status === 503) pool.down(p.decode, "draining");
        tried.add(p.decode.id);
        metrics.retries.inc();
        continue;
      }
      if (out.kind === "retry") return answer(out.status ?? 502, "upstream-unavailable", `no replica could serve the request: ${out.error.message}`, "upstream_error");
      if (out.kind === "client-gone") return void metrics.requests.inc({ path, code: "499" });
      if (out.kind === "broken") {
        pool.failed(p.decode, out.error);
        metrics.rejected.inc({ reason: "upstream-broken" });
        return void metrics.requests.inc({ path, code: "502" });
      }
      metrics.requests.inc({ path, code: String(out.status) });
      const now = performance.now();
      metrics.e2e.observe((now - arrived) / 1000);
      const ob = out.observer;
      if (ob?.firstTokenAt != null) {
        metrics.ttft.observe((ob.firstTokenAt - arrived) / 1000);
        if (ob.tokens > 1 && ob.lastTokenAt != null) metrics.tpot.observe((ob.lastTokenAt - ob.firstTokenAt) / 1000 / (ob.tokens - 1));
      }
      return;
    }
  };

  // requests being answered (close() waits for them, then drops the idle keep-alive connections)
  let active = 0;
  let closing = false;
  for (const path of COMPLETION_ROUTES)
    app.post(path, async (req, reply) => {
      if (closing) return reject(reply, path, 503, "shutting-down", "the router is shutting down", "service_unavailable_error");
      active++;
      try {
        await completion(path, req, reply);
      } finally {
        active--;
      }
    });

  /** Routes any replica can answer: the first healthy one (in configuration order), others on failure. */
  const passThrough = async (req: FastifyRequest, reply: FastifyReply) => {
    const path = req.url;
    const parsed = req.body as Parsed | undefined;
    reply.hijack();
    const res = reply.raw;
    const ac = clientSignal(res);
    const headers = upstreamHeaders(req.headers as IncomingHttpHeaders, routerHeaders);
    const tried = new Set<string>();
    for (let attempt = 0; attempt <= cfg.proxy.retries; attempt++) {
      const r = pool.replicas.find((x) => x.healthy && !tried.has(x.id));
      if (!r) break;
      const out = await forward({ replica: r, method: req.method, path, headers, body: parsed?.raw ?? null, res, extra: {}, clientGone: ac.signal, timeoutMs: cfg.proxy.requestTimeoutMs, retry503: true, observe: false });
      if (out.kind !== "retry") return;
      pool.failed(r, out.error);
      tried.add(r.id);
    }
    if (!res.headersSent) {
      res.writeHead(503, { "content-type": "application/json; charset=utf-8", "retry-after": "1" });
      res.end(JSON.stringify(errorBody(503, "no healthy replica", "service_unavailable_error")));
    }
  };
  app.get("/v1/models", passThrough);
  app.post("/tokenize", passThrough);
  app.post("/detokenize", passThrough);

  app.get("/health", async (_req, reply) => {
    const healthy = pool.replicas.filter((r) => r.healthy).length;
    const ok = !closing && decoders().length > 0;
    return reply.code(ok ? 200 : 503).send({ status: closing ? "draining" : ok ? "ok" : "no healthy replica", replicas: { healthy, total: pool.replicas.length } });
  });
  app.get("/metrics", async (_req, reply) => reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()));
  // what the router sees of each replica (operators, tests)
  app.get("/router/replicas", async () => ({
    replicas: pool.replicas.map((r) => ({
      id: r.id,
      url: r.url.origin,
      role: r.role,
      healthy: r.healthy,
      reason: r.reason,
      stale: pool.isStale(r),
      saturated: scheduler.saturated(r),
      in_flight: r.inFlight,
      metrics: r.metrics,
      kv_events: kv?.connected(r.id) ?? false,
      prefix_index: { precise: scheduler.precise.stats(r.id), approximate_blocks: scheduler.approx.size(r.id) },
    })),
    queue_depth: flow.depth,
  }));

  const discovery = new Discovery(pool, cfg.discovery);
  await discovery.start();
  await pool.start();
  return {
    app,
    config: cfg,
    pool,
    scheduler,
    flow,
    metrics,
    events,
    async listen(port?: number) {
      return app.listen({ host: cfg.server.host, port: port ?? cfg.server.port });
    },
    async close() {
      closing = true;
      flow.close();
      // let the requests in flight finish (bounded), then close every connection left (idle keep-alives)
      const end = Date.now() + cfg.proxy.requestTimeoutMs;
      while (active > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
      app.server.closeAllConnections();
      await app.close();
      discovery.stop();
      kv?.stop();
      pool.stop();
    },
  };
}
