/**
 * A policy's tunnel twice, for the variables a visitor's TLS gives: over
 * plain HTTP (rig.ts withPolicy), and on a server of its own with TLS (a
 * certificate for localhost and *.localhost, the agent trusting it with
 * --insecure), the echo service behind both. `tls<name>` is the secure
 * tunnel's subdomain, `plain<name>` the plain one's.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { selfSignedCertificate } from "../harness/certs.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";
import { echo, withPolicy, type PolicyTunnel } from "./rig.ts";

export interface PlainAndSecure {
  plain: PolicyTunnel;
  secure: Rig;
  /** A directory of the rig's own, removed with it. */
  dir: string;
  close(): Promise<void>;
}

export async function plainAndSecure(policy: string, name: string): Promise<PlainAndSecure> {
  const dir = mkdtempSync(join(tmpdir(), `burrow-${name}-`));
  const policyPath = join(dir, "policy.yml");
  let plain: PolicyTunnel | undefined;
  let secure: Rig | undefined;
  let upstream: ReturnType<typeof Bun.serve> | undefined;
  const close = async () => {
    await plain?.close();
    await secure?.close();
    upstream?.stop(true);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    writeFileSync(policyPath, policy);
    plain = await withPolicy(policy, { args: ["--subdomain", `plain${name}`] });
    const cert = await selfSignedCertificate({ names: ["localhost", "*.localhost"], ips: ["127.0.0.1"] });
    writeFileSync(join(dir, "cert.pem"), cert.certPem);
    writeFileSync(join(dir, "key.pem"), cert.keyPem);
    upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: echo });
    secure = await withServer({ server: { args: ["--tls-cert", join(dir, "cert.pem"), "--tls-key", join(dir, "key.pem")] } });
    await secure.startAgent({ kind: "http", target: upstream.port!, server: `https://localhost:${secure.server.edgePort}`, args: ["--subdomain", `tls${name}`, "--insecure", "--policy-file", policyPath] });
    return { plain, secure, dir, close };
  } catch (err) {
    await close();
    throw err;
  }
}
