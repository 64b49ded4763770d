/**
 * The browser code (the panel's, the portal's, and what they share in
 * src/ui) has its own tsconfigs (DOM types, Preact's JSX) and is left out of
 * the root one; this keeps it type-checked with the tests.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..");

for (const dir of ["src/admin/panel/web", "src/portal/web", "src/ui"])
test(`the browser code type-checks (tsc -p ${dir})`, () => {
  const tsc = Bun.spawnSync([join(root, "node_modules", ".bin", "tsc"), "--noEmit", "-p", join(root, dir)], {
    cwd: root,
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(tsc.stdout.toString() + tsc.stderr.toString()).toBe("");
  expect(tsc.exitCode).toBe(0);
}, 60_000);
