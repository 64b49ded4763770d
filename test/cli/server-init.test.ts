/**
 * `burrow server init` as a program: the real command line in a child
 * process, writing into temp dirs (paths with spaces), never into /etc.
 * --print writes nothing; an existing unit is refused unless --force; the
 * environment file is 0600, never replaced, and its password is the one the
 * server's first admin gets; the unit holds no password and passes
 * `systemd-analyze verify` where that is installed.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AdminClient } from "../harness/admin.ts";
import { compiledBurrow } from "../harness/compiled.ts";
import { startServer } from "../harness/server.ts";

const ROOT = join(import.meta.dir, "..", "..");
const SLOW = 30_000;
const SYSTEMD_ANALYZE = Bun.which("systemd-analyze");
const PASSWORD_LINE = /^BURROW_ADMIN_PASSWORD=([0-9A-Za-z]{24})$/m;

let scratch: string;
let count = 0;
/** An executable to name with --binary (systemd-analyze checks that ExecStart's file can run). */
let fakeBinary: string;

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), "burrow init "));
  mkdirSync(join(scratch, "bin dir"));
  fakeBinary = join(scratch, "bin dir", "bur row");
  writeFileSync(fakeBinary, "#!/bin/sh\nexit 0\n", { mode: 0o755 });
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Fresh unit and env file paths, in new directories with spaces in their names. */
function paths() {
  const dir = join(scratch, `case ${++count}`);
  return { dir, unit: join(dir, "systemd dir", "burrow.service"), env: join(dir, "etc burrow", "burrow.env") };
}

interface Exited {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `burrow server init ...args` (from source unless `executable`) and waits for it. */
function init(args: string[], executable?: string): Exited {
  const command = executable ? [executable] : [process.execPath, join(ROOT, "src", "main.ts")];
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("BURROW_") && v !== undefined) env[k] = v;
  const out = Bun.spawnSync([...command, "server", "init", ...args], { cwd: scratch, env, stdout: "pipe", stderr: "pipe", timeout: 15_000 });
  return { code: out.exitCode, stdout: out.stdout.toString(), stderr: out.stderr.toString() };
}

const BASE = ["--domain", "tunnels.example.com", "--public-ip", "198.51.100.7"];

function execStart(unit: string): string {
  return /^ExecStart=(.*)$/m.exec(unit)![1]!;
}

describe("writing the files", () => {
  test("the unit runs the server with the flags given; the env file is 0600 with a fresh password, printed once", () => {
    const p = paths();
    const out = init([...BASE, "--http-port", "8443", "--binary", fakeBinary, "--unit-file", p.unit, "--env-file", p.env]);
    expect(out.stderr).toBe("");
    expect(out.code).toBe(0);
    const unit = readFileSync(p.unit, "utf8");
    expect(execStart(unit)).toBe(`"${fakeBinary}" server --domain tunnels.example.com --http-port 8443 --data-dir /var/lib/burrow`);
    expect(unit).toContain(`EnvironmentFile=${p.env}\n`);

    expect(statSync(p.env).mode & 0o777).toBe(0o600);
    const password = PASSWORD_LINE.exec(readFileSync(p.env, "utf8"))?.[1];
    expect(password).toBeDefined();
    expect(out.stdout.split(password!).length - 1).toBe(1);
    expect(out.stdout).toContain("change it");
    // the password is nowhere in the unit: not in ExecStart, not in an Environment= line
    expect(unit).not.toContain(password!);
    expect(unit).not.toMatch(/^Environment=/m);

    expect(out.stdout).toContain("*.tunnels.example.com  A     198.51.100.7");
    expect(out.stdout).toContain("ufw allow 8443/tcp");
    expect(out.stdout).toContain("systemctl daemon-reload && systemctl enable --now");
    expect(out.stdout).toContain("journalctl -u burrow");
  }, SLOW);

  test("an existing unit is refused and left alone; --force replaces it and keeps the env file and its password", () => {
    const p = paths();
    expect(init([...BASE, "--binary", fakeBinary, "--unit-file", p.unit, "--env-file", p.env]).code).toBe(0);
    const unitBefore = readFileSync(p.unit, "utf8");
    const envBefore = readFileSync(p.env, "utf8");

    const refused = init([...BASE, "--http-port", "9000", "--binary", fakeBinary, "--unit-file", p.unit, "--env-file", p.env]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toStartWith("burrow: ");
    expect(refused.stderr).toContain("--force");
    expect(refused.stdout).toBe("");
    expect(readFileSync(p.unit, "utf8")).toBe(unitBefore);

    const forced = init([...BASE, "--http-port", "9000", "--binary", fakeBinary, "--unit-file", p.unit, "--env-file", p.env, "--force"]);
    expect(forced.code).toBe(0);
    expect(execStart(readFileSync(p.unit, "utf8"))).toContain("--http-port 9000");
    expect(readFileSync(p.env, "utf8")).toBe(envBefore);
    expect(forced.stdout).toContain(`Kept ${p.env}`);
    expect(forced.stdout).not.toContain(PASSWORD_LINE.exec(envBefore)![1]!);
  }, SLOW);

  test("an env file that exists is kept as it is, and one others can read is pointed out", () => {
    const p = paths();
    mkdirSync(join(p.dir, "etc burrow"), { recursive: true });
    writeFileSync(p.env, "BURROW_ADMIN_PASSWORD=mine-all-mine\n");
    chmodSync(p.env, 0o644);
    const out = init([...BASE, "--binary", fakeBinary, "--unit-file", p.unit, "--env-file", p.env]);
    expect(out.code).toBe(0);
    expect(readFileSync(p.env, "utf8")).toBe("BURROW_ADMIN_PASSWORD=mine-all-mine\n");
    expect(out.stdout).toContain("no password was generated");
    expect(out.stdout).toContain("chmod 600");
  }, SLOW);

  test("--print shows the unit, the env file with the password masked and the DNS records, and writes nothing", () => {
    const p = paths();
    const out = init([...BASE, "--public-ip", "2001:db8::7", "--binary", fakeBinary, "--unit-file", p.unit, "--env-file", p.env, "--print"]);
    expect(out.code).toBe(0);
    expect(existsSync(p.dir)).toBe(false);
    expect(out.stdout).toContain(`# ${p.unit}`);
    expect(out.stdout).toContain("ExecStart=");
    expect(out.stdout).toContain("BURROW_ADMIN_PASSWORD=<generated when written>");
    expect(out.stdout).not.toMatch(PASSWORD_LINE);
    expect(out.stdout).toContain("tunnels.example.com    AAAA  2001:db8::7");
    expect(out.stdout).toContain("*.tunnels.example.com  A     198.51.100.7");
  }, SLOW);

  test("with --acme-email: the NS record that hands the wildcard's DNS-01 to burrow, and the capability for ports 443 and 53", () => {
    const p = paths();
    const out = init([...BASE, "--acme-email", "ops@example.com", "--http-port", "8080", "--binary", fakeBinary, "--unit-file", p.unit, "--env-file", p.env, "--print"]);
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/_acme-challenge\.tunnels\.example\.com +NS +tunnels\.example\.com/);
    expect(out.stdout).toContain("AmbientCapabilities=CAP_NET_BIND_SERVICE");
    const off = init([...BASE, "--acme-email", "ops@example.com", "--http-port", "8080", "--https-port", "8443", "--dns-port", "off", "--binary", fakeBinary, "--unit-file", p.unit, "--env-file", p.env, "--print"]);
    expect(off.stdout).not.toContain("_acme-challenge");
    expect(off.stdout).not.toContain("AmbientCapabilities=CAP_NET_BIND_SERVICE");
  }, SLOW);

  test("from source without --binary, the unit runs /usr/local/bin/burrow and says so", () => {
    const out = init([...BASE, "--print"]);
    expect(out.code).toBe(0);
    expect(out.stdout).toContain('ExecStart=/usr/local/bin/burrow server');
    expect(out.stdout).toContain("Run from source");
  }, SLOW);

  test("a mistake on the command line: one 'burrow:' line, exit 2, nothing written", () => {
    const p = paths();
    for (const args of [["--http-port", "http"], ["--colour", "red"], ["--public-ip", "300.1.1.1"]]) {
      const out = init([...BASE, ...args, "--unit-file", p.unit, "--env-file", p.env]);
      expect({ args, code: out.code }).toEqual({ args, code: 2 });
      expect(out.stdout).toBe("");
      expect(out.stderr.trimEnd().split("\n")).toHaveLength(1);
      expect(out.stderr).toStartWith("burrow: ");
      expect(out.stderr).not.toContain("    at ");
    }
    expect(existsSync(p.dir)).toBe(false);
  }, SLOW);

  test("a unit it may not write: a message and exit 1, and no password made", () => {
    const p = paths();
    mkdirSync(p.dir);
    // a file where the unit's directory should be: mkdir fails whoever runs the test, root included
    writeFileSync(join(p.dir, "systemd dir"), "");
    const out = init([...BASE, "--binary", fakeBinary, "--unit-file", p.unit, "--env-file", p.env]);
    expect(out.code).toBe(1);
    expect(out.stderr).toStartWith(`burrow: cannot write the unit ${p.unit}`);
    expect(existsSync(p.env)).toBe(false);
  }, SLOW);
});

test("the env file's password is the one the server's first admin gets", async () => {
  const p = paths();
  expect(init([...BASE, "--binary", fakeBinary, "--unit-file", p.unit, "--env-file", p.env]).code).toBe(0);
  const password = PASSWORD_LINE.exec(readFileSync(p.env, "utf8"))![1]!;
  await using server = await startServer({ env: { BURROW_ADMIN_PASSWORD: password } });
  const admin = new AdminClient(server.adminUrl);
  expect((await admin.login("admin", password)).status).toBe(200);
  // taken from the environment, so the server generated and printed none of its own
  expect(server.output.text()).not.toContain("created with password");
}, SLOW);

test("the compiled burrow names itself in ExecStart", async () => {
  // the build users run (build/compile.ts, with its plugins: a bare `bun build --compile` cannot take ssh2's optional native parts)
  const binary = await compiledBurrow(join(scratch, "compiled dir"));
  const out = init([...BASE, "--print"], binary);
  expect(out.code).toBe(0);
  expect(out.stdout).toContain(`ExecStart="${binary}" server --domain tunnels.example.com --data-dir /var/lib/burrow\n`);
  expect(out.stdout).not.toContain("Run from source");
}, SLOW);

describe("systemd's own check", () => {
  const reason = "systemd-analyze is not installed (Debian package systemd)";
  if (!SYSTEMD_ANALYZE) console.warn(`skipping systemd-analyze verify: ${reason}`);

  test.skipIf(!SYSTEMD_ANALYZE)(`systemd-analyze verify accepts the unit: spaces, %, TLS credentials, a low port${SYSTEMD_ANALYZE ? "" : ` (skipped: ${reason})`}`, () => {
    const p = paths();
    const certDir = join(p.dir, "my certs 100%");
    mkdirSync(certDir, { recursive: true });
    writeFileSync(join(certDir, "cert.pem"), "");
    writeFileSync(join(certDir, "key.pem"), "");
    const args = [...BASE, "--http-port", "443", "--tls-cert", join(certDir, "cert.pem"), "--tls-key", join(certDir, "key.pem")];
    const out = init([...args, "--host", 'we$ird "host" \\ 50%', "--binary", fakeBinary, "--unit-file", p.unit, "--env-file", p.env]);
    expect(out.code).toBe(0);
    const verify = Bun.spawnSync([SYSTEMD_ANALYZE!, "verify", p.unit], { stdout: "pipe", stderr: "pipe" });
    const said = verify.stdout.toString() + verify.stderr.toString();
    // systemd reads the executable's path back out of the quoting: were it wrong, it would say "not executable"
    expect({ code: verify.exitCode, said }).toEqual({ code: 0, said: "" });
  });
});
