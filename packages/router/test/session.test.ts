// Session affinity over four `torchts serve` replicas: multi-turn sessions keyed by the x-session-token
// the router hands out (the client sends it back) or by the request's `user`, run side by side; while
// their replica is healthy >= 99% of turns reach it. Then the replicas of two sessions are killed: the
// sessions move, keep working, and stick to their new replica.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { modelDir, spawnReplicas, type ChildReplica } from "./replicas.js";
import { post, startRouter, type RunningRouter } from "./router_helpers.js";

let reps: ChildReplica[];
let rt: RunningRouter;
before(async () => {
  reps = await spawnReplicas(4, modelDir(), ["--max-num-batched-tokens", "128"]);
  // CPU replicas on two cores answer scrapes late: see prefix_routing.test.ts
  // replicas on two shared cores answer scrapes late: stale (= saturated) would move sessions for no reason
  rt = await startRouter(reps.map((r) => r.url), { health: { staleAfterMs: 5000 } });
});
after(async () => {
  await rt?.close();
  for (const r of reps ?? []) await r.kill();
});

class Session {
  messages: { role: string; content: string }[] = [];
  token: string | null = null;
  served: string[] = [];
  constructor(
    readonly name: string,
    readonly byUser: boolean,
  ) {
    this.messages.push({ role: "system", content: `You are the agent of session ${name}.` });
  }

  async turn(i: number): Promise<number> {
    this.messages.push({ role: "user", content: `step ${i} of ${this.name}` });
    const body: Record<string, unknown> = { model: "tiny", messages: this.messages, max_tokens: 3, temperature: 0 };
    if (this.byUser) body.user = this.name;
    const r = await post(`${rt.url}/v1/chat/completions`, body, this.token ? { "x-session-token": this.token } : {});
    if (r.status === 200) {
      this.messages.push({ role: "assistant", content: r.json().choices[0].message.content });
      if (!this.byUser) this.token = r.headers.get("x-session-token");
      this.served.push(r.headers.get("x-torchts-replica")!);
    }
    return r.status;
  }
}

const sessions = Array.from({ length: 12 }, (_, i) => new Session(`s${i}`, i % 2 === 1));

test("sessions stick: >= 99% of turns reach the session's replica while it is healthy", { timeout: 90_000 }, async () => {
  await Promise.all(
    sessions.map(async (s) => {
      for (let i = 0; i < 10; i++) assert.equal(await s.turn(i), 200);
    }),
  );
  let same = 0, all = 0;
  for (const s of sessions) {
    all += s.served.length;
    same += s.served.filter((x) => x === s.served[0]).length;
  }
  assert.ok(same / all >= 0.99, `${same} of ${all} turns on the session's replica`);
  assert.ok(new Set(sessions.map((s) => s.served[0])).size >= 3, "sessions spread over the replicas");
});

test("when a session's replica dies, the session moves, keeps working and sticks again", { timeout: 60_000 }, async () => {
  const byToken = sessions[0]!, byUser = sessions.find((s) => s.byUser && s.served[0] !== byToken.served[0])!;
  const victims = new Set([byToken.served[0], byUser.served[0]]);
  for (const id of victims) await reps.find((r) => r.url.endsWith(id!))!.kill();
  for (const s of [byToken, byUser]) {
    const before = s.served.length;
    for (let i = 10; i < 14; i++) assert.equal(await s.turn(i), 200, `${s.name} turn ${i}`);
    const moved = s.served.slice(before);
    assert.ok(!victims.has(moved[0]), `${s.name} moved off its dead replica`);
    assert.ok(moved.every((x) => x === moved[0]), `${s.name} sticks to its new replica: ${moved}`);
  }
});
