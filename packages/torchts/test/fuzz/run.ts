// The op fuzzer from the command line:
//   node --expose-gc --import tsx test/fuzz/run.ts [--seed N] [--long] [--op key,key] [--no-compile]
// Prints the number of calls it tried and every failure; exits 1 on any failure.
import { parseArgs } from "node:util";
import { fuzzMain } from "./main.js";

const { values } = parseArgs({
  options: {
    seed: { type: "string", default: "1" },
    long: { type: "boolean", default: false },
    op: { type: "string" },
    "no-compile": { type: "boolean", default: false },
  },
});
const code = await fuzzMain({
  seed: Number(values.seed),
  long: values.long!,
  only: values.op ? values.op.split(",") : undefined,
  compile: !values["no-compile"],
});
process.exitCode = code;
