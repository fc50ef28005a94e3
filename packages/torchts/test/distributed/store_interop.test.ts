// dist.TCPStore against PyTorch 1.13's (Debian's python3-torch, the oracle): a torchts client on a
// Python server, and a Python client on a torchts server, each doing every operation.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { distributed as dist } from "../../src/index.js";

const PY = "/usr/bin/python3";

/** Run Python `code` with `args`; `line()` resolves its stdout lines one by one. Killed after 30 s. */
function python(code: string, args: string[] = []) {
  const p = spawn(PY, ["-u", "-c", code, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  p.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const lines: string[] = [];
  const waiting: ((l: string) => void)[] = [];
  createInterface({ input: p.stdout }).on("line", (l) => {
    const w = waiting.shift();
    if (w) w(l);
    else lines.push(l);
  });
  const exited = new Promise<number>((r) => p.on("exit", (c) => r(c ?? -1)));
  const kill = setTimeout(() => p.kill("SIGKILL"), 30_000);
  void exited.then(() => clearTimeout(kill));
  return {
    line: (): Promise<string> =>
      lines.length
        ? Promise.resolve(lines.shift()!)
        : new Promise<string>((resolve, reject) => {
            waiting.push(resolve);
            void exited.then((c) => reject(new Error(`python exited (${c}) before printing a line: ${stderr}`)));
          }),
    exited,
    stderr: () => stderr,
  };
}

test("a torchts TCPStore client does every operation on PyTorch 1.13's server", async () => {
  // the server does not wait for workers, so it can print its (free) port before this client joins
  const py = python(`
import json
import torch.distributed as dist
from datetime import timedelta
s = dist.TCPStore("127.0.0.1", 0, 2, True, timedelta(seconds=20), wait_for_workers=False)
print(s.port, flush=True)
s.set("fromPy", "hi from python")
s.wait(["done"])
print(json.dumps({"k": s.get("fromTs").decode(), "bin": list(s.get("bin")), "cnt": s.get("cnt").decode(), "cas": s.get("cas").decode(), "deleted": s.check(["gone"]) if hasattr(s, "check") else None, "n": s.num_keys()}), flush=True)
`);
  const port = Number(await py.line());
  const c = new dist.TCPStore("127.0.0.1", port, { worldSize: 2, timeout: 10_000 });
  assert.equal((await c.get("fromPy")).toString(), "hi from python");
  await c.set("fromTs", "héllo");
  assert.equal((await c.get("fromTs")).toString(), "héllo");
  await c.set("bin", new Uint8Array([0, 255, 7]));
  assert.deepEqual([...(await c.get("bin"))], [0, 255, 7]);
  assert.equal(await c.add("cnt", 5), 5);
  assert.equal(await c.add("cnt", -2), 3);
  await c.set("cas", "a");
  assert.equal((await c.compareSet("cas", "a", "b")).toString(), "b"); // swapped
  assert.equal((await c.compareSet("cas", "zzz", "c")).toString(), "b"); // not swapped: the current value
  assert.equal((await c.compareSet("casNew", "", "v")).toString(), "v"); // absent + empty expected: created
  assert.equal((await c.compareSet("casNew2", "e", "v")).toString(), "e"); // absent: 1.13 answers `expected`
  assert.equal(await c.check(["fromTs", "cnt"]), true);
  assert.equal(await c.check(["fromTs", "absent"]), false);
  await c.wait(["fromTs", "cnt"]);
  await c.set("gone", "x");
  assert.equal(await c.deleteKey("gone"), true);
  assert.equal(await c.deleteKey("gone"), false);
  // fromPy fromTs bin cnt cas casNew, plus the server's init/ key (this client's join)
  assert.equal(await c.numKeys(), 7);
  const t0 = Date.now();
  await assert.rejects(c.wait(["never"], 300), /timed out after 300 ms waiting for keys 'never'/);
  assert.ok(Date.now() - t0 < 1300, "a wait times out within its timeout + 1 s");
  // the connection is usable after a timeout (it reconnects: a 1.13 server answers the abandoned wait later)
  assert.equal(await c.add("cnt", 1), 4);
  await c.set("done", "1");
  const seen = JSON.parse(await py.line()) as { k: string; bin: number[]; cnt: string; cas: string; n: number };
  assert.deepEqual(seen, { ...seen, k: "héllo", bin: [0, 255, 7], cnt: "4", cas: "b", n: 8 });
  assert.equal(await py.exited, 0, py.stderr());
  await c.close();
});

test("a PyTorch 1.13 TCPStore client does every operation on a torchts server", async () => {
  const m = new dist.TCPStore("127.0.0.1", 0, { isMaster: true, worldSize: 2, timeout: 20_000 });
  assert.ok(m.port > 0);
  const py = python(
    `
import json, sys
import torch.distributed as dist
from datetime import timedelta
c = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 2, False, timedelta(seconds=10))
out = {}
out["fromTs"] = c.get("fromTs").decode()
c.set("k", "hello")
out["get"] = c.get("k").decode()
out["add"] = [c.add("cnt", 5), c.add("cnt", -2)]
out["cas"] = [c.compare_set("k", "hello", "world").decode(), c.compare_set("k", "nope", "x").decode(), c.compare_set("newk", "", "v").decode(), c.compare_set("newk2", "abc", "v").decode()]
c.wait(["k", "cnt"])
out["n"] = c.num_keys()
out["del"] = [c.delete_key("newk"), c.delete_key("newk")]
try:
    c.wait(["never"], timedelta(seconds=0.3))
    out["waitTimeout"] = False
except RuntimeError:
    out["waitTimeout"] = True
c.set("bin", b"\\x00\\xff")
out["bin"] = list(c.get("bin"))
print(json.dumps(out), flush=True)
`,
    [String(m.port)],
  );
  await m.set("fromTs", "set by torchts");
  await m.ready(); // the master waits until the Python client joined (world size 2)
  const got = JSON.parse(await py.line()) as Record<string, unknown>;
  assert.deepEqual(got, {
    fromTs: "set by torchts",
    get: "hello",
    add: [5, 3],
    cas: ["world", "world", "v", "abc"],
    n: 5, // fromTs k cnt newk + init/
    del: [true, false],
    waitTimeout: true,
    bin: [0, 255],
  });
  assert.equal(await py.exited, 0, py.stderr());
  // what Python wrote is visible here
  assert.equal((await m.get("k")).toString(), "world");
  assert.equal((await m.get("cnt")).toString(), "3");
  assert.equal(await m.check(["newk"]), false);
  await m.close();
});

test("TCPStore: a taken port throws at construction, and arguments are checked", async () => {
  const m = new dist.TCPStore("127.0.0.1", 0, { isMaster: true });
  assert.throws(() => new dist.TCPStore("127.0.0.1", m.port, { isMaster: true }), /could not listen on 127\.0\.0\.1:\d+: EADDRINUSE/);
  assert.throws(() => new dist.TCPStore("127.0.0.1", m.port, { worldsize: 2 } as never), /unexpected keyword argument 'worldsize' \(did you mean 'worldSize'\?\)/);
  assert.throws(() => new dist.TCPStore("127.0.0.1", 0), /a client needs the server's port/);
  await assert.rejects(m.set("k", 5 as never), /argument 'value' must be str or bytes/);
  await m.close();
});
