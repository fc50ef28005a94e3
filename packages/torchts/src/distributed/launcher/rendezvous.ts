// How the launchers of a job agree on a worker group, through the job's TCPStore. A round is one
// incarnation of the group (the first start, or a restart); its keys live under
// torchts-run/<run id>/r<round>/.
// - static (--nnodes N --node-rank R): every node publishes itself and waits for all N.
// - c10d (--rdzv-endpoint, --nnodes MIN:MAX): nodes join in any order and get ranks in join order;
//   the first joiner closes the round once MAX nodes joined, or MIN nodes and the last-call time
//   passed. A node that comes after the round closed waits for the next one, and the running
//   nodes restart the group to admit it (a membership change, not counted as a restart).
// Failures travel the same way: the node that saw a worker fail writes the report, and every
// node stops its workers.
import type { TCPStore } from "../tcp_store.js";
import type { RunConfig } from "./args.js";

export interface NodeInfo {
  nproc: number;
  host: string;
}

export interface Membership {
  round: number;
  groupRank: number;
  nnodes: number;
  worldSize: number;
  /** Global rank of this node's local rank 0. */
  rankOffset: number;
}

export type RoundEvent = { kind: "failure"; report: string } | { kind: "membership" } | { kind: "done" } | null;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Rendezvous {
  private readonly base: string;
  constructor(
    private readonly store: TCPStore,
    private readonly cfg: RunConfig,
    private readonly me: NodeInfo,
  ) {
    this.base = `torchts-run/${cfg.rdzvId}/`;
  }

  private k(round: number, rest: string): string {
    return `${this.base}r${round}/${rest}`;
  }

  /** Join `round`; "done" when the job finished while this node waited to be admitted. */
  async join(round: number): Promise<Membership | "done"> {
    return this.cfg.rdzvBackend === "static" ? this.joinStatic(round) : this.joinDynamic(round);
  }

  private async joinStatic(round: number): Promise<Membership> {
    const { nodeRank, maxNodes: n } = this.cfg;
    if ((await this.store.add(this.k(round, `claim/${nodeRank}`), 1)) > 1)
      throw new Error(`rendezvous: another launcher already joined as --node-rank ${nodeRank}`);
    await this.store.set(this.k(round, `node/${nodeRank}`), JSON.stringify(this.me));
    return this.membership(round, nodeRank, n);
  }

  private async joinDynamic(round: number): Promise<Membership | "done"> {
    const { minNodes, maxNodes, lastCallMs, joinTimeoutMs } = this.cfg;
    for (;;) {
      const closedKey = this.k(round, "closed");
      if (await this.store.check([closedKey])) {
        // too late for this round: say so (the running nodes restart the group to admit this one), wait for its end, join the next
        await this.store.add(this.k(round, "waiting"), 1);
        const end = await this.waitEnd(round);
        if (end === "done") return "done";
        round++;
        continue;
      }
      const idx = (await this.store.add(this.k(round, "join"), 1)) - 1;
      await this.store.set(this.k(round, `node/${idx}`), JSON.stringify(this.me));
      if (idx === 0) {
        const deadline = Date.now() + joinTimeoutMs;
        let minSince: number | null = null;
        for (;;) {
          const count = await this.store.add(this.k(round, "join"), 0);
          if (count >= minNodes) minSince ??= Date.now();
          if (count >= maxNodes || (minSince !== null && Date.now() - minSince >= lastCallMs)) {
            await this.store.set(closedKey, String(Math.min(count, maxNodes)));
            break;
          }
          if (Date.now() > deadline) throw new Error(`rendezvous: timed out after ${joinTimeoutMs / 1000} s with ${count} of the ${minNodes} nodes needed`);
          await sleep(50);
        }
      }
      await this.store.wait([closedKey], joinTimeoutMs);
      const n = Number((await this.store.get(closedKey)).toString());
      if (idx < n) return this.membership(round, idx, n);
      const end = await this.waitEnd(round);
      if (end === "done") return "done";
      round++;
    }
  }

  private async waitEnd(round: number): Promise<string> {
    const key = this.k(round, "end");
    for (;;) {
      try {
        await this.store.wait([key], 60_000);
        return (await this.store.get(key)).toString();
      } catch (e) {
        if (!/timed out/.test((e as Error).message)) throw e;
      }
    }
  }

  private async membership(round: number, groupRank: number, n: number): Promise<Membership> {
    const keys = [...Array(n).keys()].map((j) => this.k(round, `node/${j}`));
    await this.store.wait(keys, this.cfg.joinTimeoutMs);
    const infos = await Promise.all(keys.map(async (key) => JSON.parse((await this.store.get(key)).toString()) as NodeInfo));
    let rankOffset = 0;
    for (let j = 0; j < groupRank; j++) rankOffset += infos[j]!.nproc;
    return { round, groupRank, nnodes: n, worldSize: infos.reduce((s, x) => s + x.nproc, 0), rankOffset };
  }

  /** Tell every node that this round failed (`report`: the failure summary). */
  async reportFailure(round: number, report: string): Promise<void> {
    await this.store.compareSet(this.k(round, "failed"), "", report);
    await this.end(round, "restart");
  }

  /** Ask every node to restart the group with the nodes waiting to join. */
  async requestMembershipChange(round: number): Promise<void> {
    await this.store.compareSet(this.k(round, "membership"), "", "1");
    await this.end(round, "restart");
  }

  async end(round: number, how: "restart" | "done"): Promise<void> {
    await this.store.compareSet(this.k(round, "end"), "", how);
  }

  /** What happened to the round elsewhere (polled while the workers run). */
  async poll(round: number, closedCount: number): Promise<RoundEvent> {
    const [failed, membership] = await Promise.all([this.store.check([this.k(round, "failed")]), this.store.check([this.k(round, "membership")])]);
    if (failed) return { kind: "failure", report: (await this.store.get(this.k(round, "failed"))).toString() };
    if (membership) return { kind: "membership" };
    if (this.cfg.rdzvBackend === "c10d" && closedCount < this.cfg.maxNodes) {
      // nodes that came after the round closed (a late join, or a join racing the close)
      const [joined, waiting] = await Promise.all([this.store.add(this.k(round, "join"), 0), this.store.add(this.k(round, "waiting"), 0)]);
      if (joined > closedCount || waiting > 0) return { kind: "membership" };
    }
    return null;
  }

  /**
   * After this node's workers succeeded: wait until every node's did. The node serving the store
   * then waits (briefly) until the others saw it, since its exit takes the store away.
   */
  async exitBarrier(round: number, nnodes: number, timeoutMs: number, servesStore: boolean): Promise<RoundEvent> {
    await this.store.add(this.k(round, "finished"), 1);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if ((await this.store.add(this.k(round, "finished"), 0)) >= nnodes) break;
      const ev = await this.poll(round, Number.MAX_SAFE_INTEGER);
      if (ev) return ev;
      if (Date.now() > deadline) return null;
      await sleep(50);
    }
    await this.end(round, "done");
    if (!servesStore) {
      await this.store.add(this.k(round, "left"), 1);
      return { kind: "done" };
    }
    const until = Date.now() + 10_000;
    while ((await this.store.add(this.k(round, "left"), 0)) < nnodes - 1 && Date.now() < until) await sleep(20);
    return { kind: "done" };
  }
}
