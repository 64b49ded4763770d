/**
 * The agent's token from a file: `--token-file FILE` or BURROW_TOKEN_FILE
 * (a container's secret, mounted as a file), for `burrow http` and the
 * other agent commands. The file holds the token alone, whitespace around
 * it ignored; a token given two ways, a file that cannot be read, is empty,
 * holds more than the token or is past the cap is refused on one
 * "burrow:" line (exit 2) that never quotes what the file holds.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MAX_TOKEN_FILE_BYTES } from "../../src/agent/settings/server-and-token.ts";
import { signedIn } from "../harness/admin.ts";
import { LineReader } from "../harness/lines.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let token: string;
/** A well-formed token the server never issued. */
const WRONG_TOKEN = "brw_" + "0".repeat(43);
let dir: string;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });

beforeAll(async () => {
  server = await startServer();
  const api = await signedIn(server);
  token = await api.createToken(await api.createUser("file-user"));
  dir = mkdtempSync(join(tmpdir(), "burrow-token-file-"));
});
afterAll(async () => {
  await server?.stop();
  upstream.stop(true);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const running: { kill(signal?: NodeJS.Signals | number): void; exited: Promise<number> }[] = [];
afterEach(async () => {
  for (const p of running.splice(0)) {
    p.kill("SIGKILL");
    await p.exited;
  }
});

let files = 0;
/** A file in the test's dir holding `text`; its path. */
function file(text: string | Uint8Array): string {
  const path = join(dir, `token-${++files}`);
  writeFileSync(path, text, { mode: 0o600 });
  return path;
}

/** The environment of a clean machine: no BURROW_* and no proxy, an empty config home. */
function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith("BURROW_") && !/^(https?|all)_proxy$/i.test(k)) env[k] = v;
  }
  return { ...env, XDG_CONFIG_HOME: dir, HOME: dir, ...extra };
}

/** `burrow http <upstream>` with `args` and `env`: its first telling line, its whole output, and its exit code when it ended by itself. */
async function outcome(args: string[], env: Record<string, string>): Promise<{ line: string; output: string; code: number | null }> {
  const proc = Bun.spawn([...burrowCommand(), "http", String(upstream.port), ...args], { env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  running.push(proc);
  const output = new LineReader(proc);
  const line = await output.waitFor(/^(Forwarding|burrow:)|reconnecting/, 10_000);
  const ended = line.startsWith("burrow:");
  if (!ended) proc.kill("SIGINT");
  const timer = setTimeout(() => proc.kill("SIGKILL"), 5_000);
  const code = await proc.exited;
  clearTimeout(timer);
  return { line, output: output.lines.join("\n"), code: ended ? code : null };
}

const FORWARDING = /^Forwarding  http:\/\/[a-z0-9]{8}\.localhost:\d+ -> localhost:\d+ {3}\(user file-user\)$/;

describe("the token from a file", () => {
  test("--token-file: the file's token, its trailing newline ignored", async () => {
    const r = await outcome(["--server", server.edgeUrl, "--token-file", file(`${token}\n`)], cleanEnv());
    expect(r.line).toMatch(FORWARDING);
  });

  test("BURROW_TOKEN_FILE with BURROW_SERVER, and nothing else, as a container's sidecar has them", async () => {
    const r = await outcome([], cleanEnv({ BURROW_SERVER: server.edgeUrl, BURROW_TOKEN_FILE: file(`  ${token}\r\n\n`) }));
    expect(r.line).toMatch(FORWARDING);
  });

  test("--token-file wins over BURROW_TOKEN, and --token over BURROW_TOKEN_FILE (a flag over a variable)", async () => {
    expect((await outcome(["--server", server.edgeUrl, "--token-file", file(token)], cleanEnv({ BURROW_TOKEN: WRONG_TOKEN }))).line).toMatch(FORWARDING);
    expect((await outcome(["--server", server.edgeUrl, "--token", token], cleanEnv({ BURROW_TOKEN_FILE: file(WRONG_TOKEN) }))).line).toMatch(FORWARDING);
  });

  test("the file's token is the one presented: a wrong one is refused by the server", async () => {
    const r = await outcome(["--server", server.edgeUrl, "--token-file", file(WRONG_TOKEN)], cleanEnv());
    expect(r.line).toMatch(/^burrow: refused by the server: AUTH_FAILED: /);
  });
});

describe("token files refused before anything connects (exit 2, one line, the contents never quoted)", () => {
  const refused = async (args: string[], env: Record<string, string> = {}) => {
    const r = await outcome(["--server", server.edgeUrl, ...args], cleanEnv(env));
    expect(r.code).toBe(2);
    expect(r.output).not.toContain("brw_");
    expect(r.output).not.toContain("secret-words");
    return r.line;
  };

  test("a token given both ways, as flags or as variables", async () => {
    expect(await refused(["--token", token, "--token-file", file(token)])).toBe("burrow: --token and --token-file both give the token: keep one");
    expect(await refused([], { BURROW_TOKEN: token, BURROW_TOKEN_FILE: file(token) })).toBe("burrow: BURROW_TOKEN and BURROW_TOKEN_FILE both give the token: keep one");
  });

  test("a file that is not there, or a directory", async () => {
    const missing = join(dir, "no-such-file");
    expect(await refused(["--token-file", missing])).toBe(`burrow: --token-file: cannot read ${missing} (ENOENT)`);
    expect(await refused([], { BURROW_TOKEN_FILE: dir })).toBe(`burrow: BURROW_TOKEN_FILE: cannot read ${dir} (EISDIR)`);
  });

  test("an empty file, or one of whitespace", async () => {
    const empty = file("");
    expect(await refused(["--token-file", empty])).toBe(`burrow: --token-file: ${empty} is empty`);
    const blank = file(" \n\n");
    expect(await refused(["--token-file", blank])).toBe(`burrow: --token-file: ${blank} is empty`);
  });

  test("a file holding more than the token (a second line, words around it)", async () => {
    const two = file(`${token}\nsecret-words\n`);
    expect(await refused(["--token-file", two])).toBe(`burrow: --token-file: ${two} holds more than one word; it must hold the token alone`);
    const words = file(`token: ${token}`);
    expect(await refused(["--token-file", words])).toBe(`burrow: --token-file: ${words} holds more than one word; it must hold the token alone`);
  });

  test(`a file past ${MAX_TOKEN_FILE_BYTES} bytes is not read whole, and one at the cap is read`, async () => {
    const big = file(token + " ".repeat(MAX_TOKEN_FILE_BYTES - token.length + 1));
    expect(await refused(["--token-file", big])).toBe(`burrow: --token-file: ${big} is larger than a token file may be (${MAX_TOKEN_FILE_BYTES} bytes)`);
    const atCap = file(token + "\n".repeat(MAX_TOKEN_FILE_BYTES - token.length));
    expect((await outcome(["--server", server.edgeUrl, "--token-file", atCap], cleanEnv())).line).toMatch(FORWARDING);
  });
});
