/**
 * The single executable: compiled fresh, copied alone into an empty
 * directory, it starts, creates its database from embedded migrations and
 * answers the admin API.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AdminClient } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const root = join(import.meta.dir, "..", "..");
let workDir: string;
let binary: string;

beforeAll(async () => {
  workDir = mkdtempSync(join(tmpdir(), "burrow-binary-"));
  const build = Bun.spawnSync(
    [process.execPath, "build", "--compile", "--minify", join(root, "src/main.ts"), "--outfile", join(workDir, "build", "burrow")],
    { cwd: root, stdout: "pipe", stderr: "pipe" },
  );
  if (build.exitCode !== 0) throw new Error(`build failed: ${build.stderr.toString()}`);
  // alone in an empty directory: no node_modules, no drizzle/ folder beside it
  const runDir = join(workDir, "run");
  Bun.spawnSync(["mkdir", "-p", runDir]);
  binary = join(runDir, "burrow");
  copyFileSync(join(workDir, "build", "burrow"), binary);
  Bun.spawnSync(["chmod", "+x", binary]);
}, 120_000);

afterAll(() => rmSync(workDir, { recursive: true, force: true }));

test("the compiled binary prints its version", () => {
  const out = Bun.spawnSync([binary, "--version"], { cwd: join(workDir, "run") });
  expect(out.exitCode).toBe(0);
  expect(out.stdout.toString()).toMatch(/^burrow \d+\.\d+\.\d+/);
});

test("the compiled binary, alone in an empty directory, creates its database and answers login", async () => {
  const dataDir = join(workDir, "run", "data");
  await using server: TestServer = await startServer({ executable: binary, dataDir });
  expect(existsSync(join(dataDir, "burrow.db"))).toBe(true);
  const api = new AdminClient(server.adminUrl);
  expect((await api.get("/api/auth/me")).status).toBe(401);
  const login = await api.login();
  expect(login.status).toBe(200);
  expect(login.body.user).toEqual({ id: 1, username: "admin", role: "admin" });
  expect((await api.post("/api/users", { username: "bob", password: "password-123" })).status).toBe(201);
  expect(readdirSync(join(workDir, "run")).sort()).toEqual(["burrow", "data"]);
});

test("the compiled binary raises a low soft open-file limit to the hard one, and logs what it runs with", async () => {
  const hard = Number(Bun.spawnSync(["sh", "-c", "ulimit -Hn"]).stdout.toString().trim());
  const soft = Math.min(512, hard);
  await using server: TestServer = await startServer({ executable: binary, prefix: ["sh", "-c", `ulimit -Sn ${soft} && exec "$@"`, "sh"] });
  const line = await server.output.waitFor(/open_files=/, 5_000);
  expect(line).toContain(`open_files=${hard}`);
});

test("npm run build writes the commit, its date and the target into the executable, and `burrow version` prints them", async () => {
  const outfile = join(workDir, "release-build", "burrow");
  const build = Bun.spawnSync([process.execPath, join(root, "build", "compile.ts"), "--outfile", outfile], { cwd: root, stdout: "pipe", stderr: "pipe" });
  expect(build.exitCode).toBe(0);
  const git = (...args: string[]) => Bun.spawnSync(["git", ...args], { cwd: root, stdout: "pipe" }).stdout.toString().trim();
  const lines = Bun.spawnSync([outfile, "version"]).stdout.toString().trim().split("\n");
  expect(lines[0]).toMatch(/^burrow \d+\.\d+\.\d+$/);
  expect(lines[1]).toMatch(new RegExp(`^commit  ${git("rev-parse", "--short=12", "HEAD")}(\\+changes)?$`));
  expect(lines[2]).toBe(`built   ${git("log", "-1", "--format=%cI", "HEAD")}`);
  expect(lines[3]).toBe(`target  ${process.platform === "win32" ? "windows" : process.platform}-${process.arch}`);
}, 120_000);
