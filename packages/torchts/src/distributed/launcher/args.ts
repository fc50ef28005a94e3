// `torchts run` arguments: torchrun's flags (both --dash-case and --snake_case spellings), then the
// script and its own arguments (everything from the first non-flag on belongs to the script).
import { availableParallelism } from "node:os";

export class UsageError extends Error {}

export interface RunConfig {
  nprocPerNode: number;
  minNodes: number;
  maxNodes: number;
  nodeRank: number;
  masterAddr: string;
  masterPort: number;
  /** static: fixed nodes with given ranks; c10d: nodes join an endpoint and get ranks in join order. */
  rdzvBackend: "static" | "c10d";
  rdzvHost: string;
  rdzvPort: number;
  rdzvId: string;
  joinTimeoutMs: number;
  lastCallMs: number;
  maxRestarts: number;
  monitorIntervalMs: number;
  role: string;
  noPython: boolean;
  script: string;
  scriptArgs: string[];
}

export const RUN_USAGE = `usage: torchts run [--nproc-per-node N|cpu|auto] [--nnodes N|MIN:MAX] [--node-rank R]
                   [--master-addr A] [--master-port P] [--rdzv-endpoint HOST:PORT] [--rdzv-backend static|c10d]
                   [--rdzv-id ID] [--rdzv-conf join_timeout=S,last_call_timeout=S] [--standalone]
                   [--max-restarts K] [--monitor-interval S] [--role NAME] [--no-python]
                   script.(ts|js) [script args...]
Starts N worker processes per node with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*), stops them all when one
fails (printing the failing rank's error), and restarts the group up to --max-restarts times.
A flag not given is read from PET_<FLAG> (PET_NPROC_PER_NODE, PET_NNODES, ...), as torchrun does.`;

const FLAGS = new Set([
  "nproc-per-node", "nnodes", "node-rank", "master-addr", "master-port", "rdzv-endpoint", "rdzv-backend", "rdzv-id",
  "rdzv-conf", "max-restarts", "monitor-interval", "role", "standalone", "no-python", "help",
]);
const BOOLEAN = new Set(["standalone", "no-python", "help"]);

function int(flag: string, v: string, min: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new UsageError(`--${flag}: expected an integer >= ${min}, got '${v}'`);
  return n;
}

function hostPort(flag: string, v: string, defaultPort: number): [string, number] {
  // HOST, HOST:PORT, [V6]:PORT
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(v) ?? /^([^:]+)(?::(\d+))?$/.exec(v);
  if (!m) throw new UsageError(`--${flag}: expected HOST:PORT, got '${v}'`);
  return [m[1]!, m[2] === undefined ? defaultPort : int(flag, m[2], 1)];
}

/**
 * A flag not given takes torchrun's environment default, PET_<FLAG> (PET_NPROC_PER_NODE,
 * PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR, ...): what Kubeflow's PyTorchJob sets.
 */
function fromEnv(v: Map<string, string>, env: NodeJS.ProcessEnv): void {
  for (const f of FLAGS) {
    if (f === "help" || v.has(f)) continue;
    const e = env[`PET_${f.replace(/-/g, "_").toUpperCase()}`];
    if (e === undefined || e === "") continue;
    if (!BOOLEAN.has(f)) v.set(f, e);
    else if (e !== "0" && e.toLowerCase() !== "false") v.set(f, "1");
  }
}

export function parseRunArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): RunConfig | "help" {
  const v = new Map<string, string>();
  let i = 0;
  for (; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--") {
      i++;
      break;
    }
    if (!a.startsWith("-")) break;
    const eq = a.indexOf("=");
    const name = a.slice(a.startsWith("--") ? 2 : 1, eq < 0 ? undefined : eq).replace(/_/g, "-");
    const key = name === "h" ? "help" : name;
    if (!FLAGS.has(key)) throw new UsageError(`unrecognized argument: ${a}`);
    if (BOOLEAN.has(key)) {
      v.set(key, "1");
      continue;
    }
    const val = eq >= 0 ? a.slice(eq + 1) : argv[++i];
    if (val === undefined) throw new UsageError(`--${key}: expected a value`);
    v.set(key, val);
  }
  if (v.has("help")) return "help";
  fromEnv(v, env);
  const script = argv[i];
  if (script === undefined) throw new UsageError("the training script is required");
  const scriptArgs = argv.slice(i + 1);

  const nprocRaw = v.get("nproc-per-node") ?? "1";
  const nprocPerNode = nprocRaw === "cpu" || nprocRaw === "auto" ? availableParallelism() : int("nproc-per-node", nprocRaw, 1);
  let minNodes = 1;
  let maxNodes = 1;
  const nn = v.get("nnodes");
  if (nn !== undefined) {
    const parts = nn.split(":");
    if (parts.length === 1) minNodes = maxNodes = int("nnodes", nn, 1);
    else if (parts.length === 2) {
      minNodes = int("nnodes", parts[0]!, 1);
      maxNodes = int("nnodes", parts[1]!, 1);
      if (maxNodes < minNodes) throw new UsageError(`--nnodes: MIN:MAX needs MIN <= MAX, got '${nn}'`);
    } else throw new UsageError(`--nnodes: expected N or MIN:MAX, got '${nn}'`);
  }
  const standalone = v.has("standalone");
  const masterAddr = v.get("master-addr") ?? "127.0.0.1";
  const masterPort = v.has("master-port") ? int("master-port", v.get("master-port")!, 1) : 29500;
  let rdzvBackend: "static" | "c10d" = v.has("rdzv-endpoint") || minNodes !== maxNodes ? "c10d" : "static";
  const b = v.get("rdzv-backend");
  if (b !== undefined) {
    if (b !== "static" && b !== "c10d") throw new UsageError(`--rdzv-backend: expected static or c10d, got '${b}'`);
    rdzvBackend = b;
  }
  if (rdzvBackend === "static" && minNodes !== maxNodes) throw new UsageError("--nnodes MIN:MAX needs a dynamic rendezvous (--rdzv-endpoint HOST:PORT)");
  let [rdzvHost, rdzvPort] = v.has("rdzv-endpoint") ? hostPort("rdzv-endpoint", v.get("rdzv-endpoint")!, 29400) : [masterAddr, masterPort];
  if (standalone) {
    if (maxNodes !== 1) throw new UsageError("--standalone runs one node: it cannot be combined with --nnodes > 1");
    // a private rendezvous on a free local port (torchrun's --standalone)
    [rdzvHost, rdzvPort] = ["127.0.0.1", 0];
    rdzvBackend = "static";
  }
  const conf = new Map<string, string>();
  for (const kv of (v.get("rdzv-conf") ?? "").split(",").filter(Boolean)) {
    const [k, val] = kv.split("=");
    if (!k || val === undefined) throw new UsageError(`--rdzv-conf: expected key=value pairs, got '${kv}'`);
    conf.set(k.trim(), val.trim());
  }
  const seconds = (k: string, d: number) => {
    const s = conf.get(k);
    if (s === undefined) return d * 1000;
    const n = Number(s);
    if (!(n >= 0)) throw new UsageError(`--rdzv-conf ${k}: expected seconds, got '${s}'`);
    return n * 1000;
  };
  const interval = Number(v.get("monitor-interval") ?? "0.1");
  if (!(interval > 0)) throw new UsageError(`--monitor-interval: expected seconds > 0, got '${v.get("monitor-interval")}'`);
  const nodeRank = v.has("node-rank") ? int("node-rank", v.get("node-rank")!, 0) : 0;
  if (rdzvBackend === "static" && nodeRank >= maxNodes) throw new UsageError(`--node-rank ${nodeRank} is out of range for --nnodes ${maxNodes}`);
  return {
    nprocPerNode,
    minNodes,
    maxNodes,
    nodeRank,
    masterAddr: standalone ? "127.0.0.1" : rdzvBackend === "static" ? masterAddr : rdzvHost,
    masterPort: standalone ? 0 : rdzvBackend === "static" ? masterPort : rdzvPort,
    rdzvBackend,
    rdzvHost,
    rdzvPort,
    rdzvId: v.get("rdzv-id") ?? "none",
    joinTimeoutMs: seconds("join_timeout", 600),
    lastCallMs: seconds("last_call_timeout", 30),
    maxRestarts: v.has("max-restarts") ? int("max-restarts", v.get("max-restarts")!, 0) : 0,
    monitorIntervalMs: interval * 1000,
    role: v.get("role") ?? "default",
    noPython: v.has("no-python"),
    script,
    scriptArgs,
  };
}
