// torch.nn: modules, layers, init and losses. F lives in ./functional.ts.
export * as functional from "./functional.js";
