// A torchts server in its own process (forked by serve.ts over IPC), so the benchmark client never
// shares an event loop or the wasm threads with it: createServer() + LLMEngine on 127.0.0.1, port 0,
// over a model folder. It answers IPC messages with the engine's stats (the prefix-cache and HiCache
// counters /metrics does not export) and stops on "close".
//   argv[2]: the model folder; argv[3]: LLMEngine options as JSON
import { AutoModelForCausalLM, AutoTokenizer } from "torchts/transformers";
import * as torch from "torchts";
import { LLMEngine, type LLMEngineOptions } from "../../packages/serve/src/engine.js";
import { createServer } from "../../packages/serve/src/server.js";

const [dir, optsJson] = process.argv.slice(2);
if (!dir || !process.send) throw new Error("server_child.ts is forked by bench/serve with a model folder");
const opts = JSON.parse(optsJson ?? "{}") as Partial<LLMEngineOptions>;
const model = await AutoModelForCausalLM.fromPretrained(dir, { deviceMap: "cpu" });
const tokenizer = await AutoTokenizer.fromPretrained(dir);
const engine = new LLMEngine({ model, tokenizer, ...opts });
const server = await createServer({ engine, modelName: "bench", aliases: [dir] });
const url = await server.app.listen({ host: "127.0.0.1", port: 0 });
process.send({ type: "listening", url, threads: torch.backends.cpu.getNumThreads(), numKvBlocks: engine.numKvBlocks });
process.on("message", (m: { type: string }) => {
  if (m.type === "stats") process.send!({ type: "stats", stats: engine.stats });
  else if (m.type === "close")
    // exit once drained: the wasm runtime's worker threads would keep the process alive
    void server.drain().then(() => process.send!({ type: "closed" }, () => process.exit(0)));
});
