/**
 * The agent commands never load argon2: only the server hashes passwords.
 * With the package made unloadable (as where a binary carries no binding
 * for its platform), `--version`, `help`, `http --help`, `tcp --help` and
 * `login --help` still work, and the server is the one that fails.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");
const PRELOAD = join(import.meta.dir, "no-argon2.preload.ts");

function run(args: string[]) {
  const out = Bun.spawnSync([process.execPath, "--preload", PRELOAD, "src/main.ts", ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, XDG_CONFIG_HOME: "/nonexistent-burrow-test" } });
  return { code: out.exitCode, text: out.stdout.toString() + out.stderr.toString() };
}

test.each(["--version", "--help", "http --help", "tcp --help", "login --help"])("burrow %s works without argon2", (command) => {
  const { code, text } = run(command.split(" "));
  expect(text).not.toContain("native binding");
  expect(code).toBe(0);
});

test("burrow http gets as far as its own checks without argon2", () => {
  // no server or token anywhere: the agent's own usage error, not a failed import
  const { code, text } = run(["http", "3000"]);
  expect(text).not.toContain("native binding");
  expect(code).toBe(2);
});

test("the server does need argon2: the block is real", () => {
  const { code, text } = run(["server", "--help"]);
  expect(code).not.toBe(0);
  expect(text).toContain("native binding");
});
