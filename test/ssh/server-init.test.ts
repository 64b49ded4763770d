/**
 * `burrow server init --ssh-port N`: the unit starts the gateway, and the
 * report opens its port and says where its host keys' fingerprints are.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { burrowCommand } from "../harness/server.ts";

test("server init --ssh-port 2222: ExecStart has it, the firewall opens it, the report says where the fingerprints are", () => {
  const dir = mkdtempSync(join(tmpdir(), "burrow-ssh-init-"));
  try {
    const unit = join(dir, "burrow.service");
    const run = Bun.spawnSync([...burrowCommand(), "server", "init", "--domain", "tunnels.example.com", "--ssh-port", "2222", "--unit-file", unit, "--env-file", join(dir, "burrow.env"), "--public-ip", "203.0.113.5"], { stdout: "pipe", stderr: "pipe" });
    const out = run.stdout.toString();
    expect(run.exitCode).toBe(0);
    expect(readFileSync(unit, "utf8")).toMatch(/^ExecStart=.*--ssh-port 2222/m);
    expect(out).toMatch(/^ {2}2222 +the SSH gateway: tunnels with plain ssh -R and -L$/m);
    expect(out).toContain("ufw allow 2222/tcp");
    expect(out).toContain("fingerprint_ed25519=SHA256:");
    expect(out).toContain("GET /_burrow/api/ssh");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
