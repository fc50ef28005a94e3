// Preloaded into every worker by `torchts run` (node --import): an uncaught error is written to
// $TORCHELASTIC_ERROR_FILE in torchelastic's format (what its @record decorator writes), so the
// launcher's failure report shows the failing rank's error. The process still prints and exits
// as it would have: the monitor only observes.
import { writeFileSync } from "node:fs";

const file = process.env.TORCHELASTIC_ERROR_FILE;
if (file) {
  process.on("uncaughtExceptionMonitor", (err: unknown) => {
    const e = err instanceof Error ? err : new Error(String(err));
    const data = {
      message: {
        message: `${e.name}: ${e.message}`,
        extraInfo: { py_callstack: e.stack ?? `${e.name}: ${e.message}`, timestamp: String(Math.floor(Date.now() / 1000)) },
      },
    };
    try {
      writeFileSync(file, JSON.stringify(data));
    } catch {
      /* the report falls back to the exit code */
    }
  });
}
