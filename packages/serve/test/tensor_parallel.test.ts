// `torchts serve --tensor-parallel-size 2` (src/tp/): the server (rank 0) and the worker it spawns split
// the fixture Llama's heads and MLP units. Through the openai SDK its greedy completions and chats, several
// at once (batched steps, prefix-cache hits), streamed or not, equal an unsplit server's; a Ctrl-C to the
// whole process group drains (the worker outlives the SIGINT until the server stops it); a killed worker
// makes the server end the request and exit 1 naming it; a killed server takes its worker with it.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import { load, modelDir } from "./helpers.js";
import { startServer, until, type Running } from "./server_helpers.js";
import { sampleValue, scrape } from "./robust_helpers.js";

const BIN = fileURLToPath(new URL("../../torchts/bin/torchts.js", import.meta.url));

interface Served {
  child: ChildProcess;
  url: string;
  /** The worker's pid, from the server's start-up line. */
  worker: number;
  out: () => string;
  err: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function serve(dir: string, args: string[], opts: { detached?: boolean } = {}): Promise<Served> {
  const child = spawn(process.execPath, [BIN, "serve", "--model", dir, "--port", "0", "--served-model-name", "tiny", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    detached: opts.detached ?? false,
  });
  let out = "";
  let err = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (err += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.on("exit", (code, signal) => r({ code, signal })));
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no 'listening' line in 40 s: ${out} ${err}`)), 40_000);
    child.stdout!.on("data", () => {
      const m = /listening on (http:\/\/\S+)/.exec(out);
      const w = /worker rank 1 started \(pid (\d+)\)/.exec(out);
      if (m && w) {
        clearTimeout(t);
        resolve({ child, url: m[1]!, worker: Number(w[1]), out: () => out, err: () => err, exited });
      }
    });
    void exited.then(() => reject(new Error(`exited early: ${out} ${err}`)));
  });
}

/** Whether `pid` is a live process (a zombie no reaper collected counts as gone). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

// vLLM's extra field (not in the SDK's types)
const IGNORE_EOS = { ignore_eos: true } as object;
const client = (url: string) => new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 30_000 });
const children: ChildProcess[] = [];
let dir: string;
let ref: Running;
let tp: Served; // drained by a Ctrl-C at the end
let victim: Served; // loses its worker
let crash: Served; // is killed itself

before(async () => {
  dir = modelDir();
  const { model, tokenizer } = await load(dir);
  [ref, tp, victim, crash] = await Promise.all([
    startServer(model, tokenizer, {}, { modelName: "tiny" }),
    serve(dir, ["--tensor-parallel-size", "2"], { detached: true }),
    serve(dir, ["-tp", "2"]),
    serve(dir, ["-tp=2"]),
  ]);
  children.push(tp.child, victim.child, crash.child);
});
after(async () => {
  await ref.close();
  for (const c of children) c.kill("SIGKILL");
});

test("-tp 2: greedy completions (a batch of prompts, logprobs) and chats at once, streamed or not, equal -tp 1's", { timeout: 60_000 }, async () => {
  const prompts = ["The meaning of life is", "Hello", "Tensor parallel serving splits the heads of every layer"];
  const chats = [
    [{ role: "user" as const, content: "Say something." }],
    [{ role: "system" as const, content: "You are terse." }, { role: "user" as const, content: "Count to three, then stop." }],
  ];
  const ask = (c: OpenAI) =>
    Promise.all([
      c.completions.create({ model: "tiny", prompt: prompts, temperature: 0, max_tokens: 12, logprobs: 2 }),
      ...chats.map((messages) => c.chat.completions.create({ model: "tiny", messages, temperature: 0, max_tokens: 10 })),
    ]);
  const [want, got] = [await ask(client(ref.url)), await ask(client(tp.url))];
  const [cw, ...chatW] = want as [OpenAI.Completion, ...OpenAI.ChatCompletion[]];
  const [cg, ...chatG] = got as [OpenAI.Completion, ...OpenAI.ChatCompletion[]];
  assert.equal(cg.choices.length, prompts.length);
  cw.choices.forEach((w, i) => {
    const g = cg.choices[i]!;
    assert.equal(g.text, w.text, `prompt ${i}`);
    assert.equal(g.finish_reason, w.finish_reason);
    assert.deepEqual(g.logprobs!.tokens, w.logprobs!.tokens);
    // the same distribution up to float summation order (the all-reduce adds the ranks' partial sums)
    g.logprobs!.token_logprobs!.forEach((lp, j) => assert.ok(Math.abs(lp - w.logprobs!.token_logprobs![j]!) < 1e-4, `prompt ${i} token ${j}: ${lp} vs ${w.logprobs!.token_logprobs![j]}`));
  });
  assert.ok(cw.choices.some((c) => c.text.length > 0));
  chatW.forEach((w, i) => assert.equal(chatG[i]!.choices[0]!.message.content, w.choices[0]!.message.content, `chat ${i}`));
  assert.deepEqual(cg.usage, cw.usage);

  // the same chats streamed, both at once: their prompts' blocks now come from the prefix cache
  const streamed = await Promise.all(
    chats.map(async (messages) => {
      const s = await client(tp.url).chat.completions.create({ model: "tiny", messages, temperature: 0, max_tokens: 10, stream: true, stream_options: { include_usage: true } });
      let text = "";
      let usage: OpenAI.CompletionUsage | null | undefined = null;
      for await (const c of s) {
        text += c.choices[0]?.delta.content ?? "";
        usage = c.usage ?? usage;
      }
      return { text, usage };
    }),
  );
  streamed.forEach((s, i) => {
    assert.equal(s.text, chatW[i]!.choices[0]!.message.content, `streamed chat ${i}`);
    assert.ok(s.usage!.prompt_tokens_details!.cached_tokens! >= 16, `streamed chat ${i} reused the cached prompt`);
  });

  const health = await fetch(`${tp.url}/health`);
  assert.equal(health.status, 200);
  const m = await scrape(tp.url);
  const generated = cg.usage!.completion_tokens + chatG.reduce((n, c) => n + c.usage!.completion_tokens, 0) + streamed.reduce((n, c) => n + c.usage!.completion_tokens, 0);
  assert.equal(sampleValue(m, "vllm:generation_tokens_total"), generated);
  assert.equal(sampleValue(m, "vllm:num_requests_running"), 0);
});

test("a killed worker: the request in flight ends, the server says which rank died and exits 1", { timeout: 30_000 }, async () => {
  const s = await client(victim.url).completions.create({ model: "tiny", prompt: "keep going", max_tokens: 100, temperature: 0, stream: true, ...IGNORE_EOS });
  let chunks = 0;
  let finish: string | null = null;
  for await (const c of s) {
    if (chunks++ === 1) process.kill(victim.worker, "SIGKILL");
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  assert.ok(chunks < 100, `${chunks} chunks: the request ran on without the worker`);
  assert.notEqual(finish, "length");
  const { code } = await victim.exited;
  assert.equal(code, 1);
  assert.match(victim.err(), /tensor parallel worker rank 1 \(pid \d+\) exited unexpectedly \(signal SIGKILL\)/);
});

test("a killed server takes its worker with it", { timeout: 30_000 }, async () => {
  assert.ok(alive(crash.worker));
  crash.child.kill("SIGKILL");
  await crash.exited;
  assert.ok(await until(() => !alive(crash.worker), 15_000), "the worker outlived its server");
});

test("Ctrl-C (SIGINT to the process group) drains: the running request finishes on both ranks, then both exit", { timeout: 30_000 }, async () => {
  const s = await client(tp.url).completions.create({ model: "tiny", prompt: "drain me", max_tokens: 40, temperature: 0, stream: true, ...IGNORE_EOS });
  let chunks = 0;
  let finish: string | null = null;
  for await (const c of s) {
    if (chunks++ === 1) process.kill(-tp.child.pid!, "SIGINT");
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, "length");
  assert.equal((await tp.exited).code, 0, tp.err());
  assert.match(tp.out(), /draining/);
  // torch.scope frees the step's DTensors without a release error
  assert.doesNotMatch(tp.err(), /releaseErrors/);
  assert.ok(await until(() => !alive(tp.worker), 5_000), "the worker outlived its server");
});

test("--tensor-parallel-size that does not divide the heads: a usage error before any weight loads", { timeout: 30_000 }, async () => {
  const run = (n: string) =>
    new Promise<{ code: number | null; err: string }>((resolve) => {
      const c = spawn(process.execPath, [BIN, "serve", "--model", dir, "--tensor-parallel-size", n], { stdio: ["ignore", "ignore", "pipe"] });
      let err = "";
      c.stderr.on("data", (d) => (err += d));
      c.on("exit", (code) => resolve({ code, err }));
    });
  const [three, four, zero] = await Promise.all([run("3"), run("4"), run("0")]);
  assert.equal(three.code, 2);
  assert.match(three.err, /--tensor-parallel-size 3: the model's 4 attention heads \(num_attention_heads\) are not divisible by the tensor parallel size 3/);
  assert.equal(four.code, 2);
  assert.match(four.err, /the model's 2 key\/value heads \(num_key_value_heads\) are not divisible by the tensor parallel size 4/);
  assert.equal(zero.code, 2);
  assert.match(zero.err, /--tensor-parallel-size: expected an integer >= 1, got '0'/);
});
