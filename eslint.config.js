// Lint setup: typescript-eslint's recommended rules (syntax-only, no type information, so
// linting stays fast and does not depend on the compiler used by `npm run typecheck`).
import js from "@eslint/js";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["**/node_modules/**", "**/dist/**", "**/coverage/**", "**/.cache/**", "packages/*/scratch/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: { ...globals.node },
    },
    rules: {
      // Hygiene rules warn (shown, not failing) while many files are being written at once;
      // correctness rules stay errors. `_x` marks a deliberately unused parameter or binding.
      "@typescript-eslint/no-unused-vars": [
        "warn",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" },
      ],
      // Generated kernels and autograd plumbing need `this` aliases and Function-typed tables.
      "@typescript-eslint/no-this-alias": "off",
      "@typescript-eslint/no-unsafe-function-type": "off",
      // Interface merging (`declare module "../tensor.js"`) is how methods are attached.
      "@typescript-eslint/no-empty-object-type": "off",
      "@typescript-eslint/no-namespace": "off",
      // Module.forward and hook signatures are as dynamic as PyTorch's.
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unused-expressions": ["warn", { allowShortCircuit: true, allowTernary: true }],
      "no-self-compare": "off", // x !== x is the NaN test inside kernels
      "no-loss-of-precision": "warn", // constants copied from PyTorch keep all their digits
      // Warnings, not errors: a few core files still trip these and are being edited concurrently.
      "prefer-const": ["warn", { destructuring: "all" }],
      "no-useless-assignment": "warn",
    },
  },
);
