// A process that lets tensors die and collects them as it exits (argv[2] says where), then
// exits normally. Node 20 aborted such a process at teardown (SIGABRT, "illegal access") when
// the tensors' registry came from a vm context: memory_exit.test.ts runs it.
import * as torch from "../../src/index.js";

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with --expose-gc");
function garbage(n: number): void {
  for (let i = 0; i < n; i++) torch.ones([64]).add(1);
}

const where = process.argv[2];
garbage(100);
if (where === "exit") {
  process.on("exit", () => {
    garbage(100);
    gc();
    process.stdout.write("exit handler done\n");
  });
} else if (where === "beforeExit") {
  let once = false;
  process.on("beforeExit", () => {
    if (once) return;
    once = true;
    garbage(100);
    gc();
    process.stdout.write("beforeExit handler done\n");
  });
} else if (where === "exitCall") {
  garbage(100);
  gc();
  process.on("exit", () => {
    garbage(10);
    gc();
    process.stdout.write("exitCall handler done\n");
  });
  process.exit(0);
} else throw new Error(`unknown place ${where}`);
