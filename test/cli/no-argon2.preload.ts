/**
 * Preloaded by no-argon2.test.ts: argon2's package cannot be loaded at all,
 * as on a platform whose native binding is missing from the binary.
 */
import { plugin } from "bun";

plugin({
  name: "no argon2",
  setup(build) {
    build.onResolve({ filter: /^@node-rs\/argon2/ }, () => {
      throw new Error("Cannot find native binding (argon2 is blocked for this test)");
    });
  },
});
