/**
 * The panel's browser code has its own tsconfig (DOM types, Preact's JSX) and
 * is left out of the root one; this keeps it type-checked with the tests.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..");

test("the panel's browser code type-checks (tsc -p src/admin/panel/web)", () => {
  const tsc = Bun.spawnSync([join(root, "node_modules", ".bin", "tsc"), "--noEmit", "-p", join(root, "src/admin/panel/web")], {
    cwd: root,
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(tsc.stdout.toString() + tsc.stderr.toString()).toBe("");
  expect(tsc.exitCode).toBe(0);
}, 60_000);
