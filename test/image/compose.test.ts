/**
 * The compose files (container/compose*.yaml), read by two real compose
 * implementations from Debian: `docker-compose config` (docker-compose 1.29,
 * which checks a file against the Compose schema and fills in its variables)
 * and `podman-compose --dry-run up` (which prints the podman commands it would
 * run). What they must keep: the admin API published on the host's loopback
 * only, ports below 1024 by the sysctl with no capability, a read-only root
 * with /tmp writable, the data volume, a restart policy, the image's own
 * health check (podman-compose 1.0 would run a compose file's CMD health
 * check through /bin/sh, which the image does not have), the agent's token
 * from a secret file, and a clear refusal when a required setting is missing.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { parse } from "yaml";
import { aptInstall } from "../harness/debian-packages.ts";
import { podmanSkipReason, runCommand, startPodman, type Podman } from "../harness/podman.ts";

const DIR = join(import.meta.dir, "..", "..", "container");
const DOCKER_COMPOSE = "/usr/bin/docker-compose";
const noDockerCompose = process.platform !== "linux" ? "Linux only" : Bun.which("docker-compose") || (aptInstall(["docker-compose"], "the compose files' test") && Bun.which("docker-compose")) ? undefined : "Debian's docker-compose could not be installed";
const noPodman = podmanSkipReason();
for (const why of [noDockerCompose, noPodman]) if (why) console.error(`compose tests skipped in part: ${why}`);

/** What a .env file beside them would hold. */
const SETTINGS = {
  BURROW_DOMAIN: "tunnels.example.com",
  BURROW_ACME_EMAIL: "ops@example.com",
  BURROW_SERVER: "https://tunnels.example.com",
  BURROW_DATABASE_URL: "postgres://burrow:pw@10.0.0.11:5432/burrow",
  BURROW_CLUSTER_SECRET: "0123456789abcdef0123456789abcdef",
  BURROW_NODE_ID: "n1",
  BURROW_NODE_URL: "http://10.0.0.11:8080",
  BURROW_PUBLIC_URL: "https://tunnels.example.com",
};

function env(settings: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("BURROW_")) out[k] = v;
  return { ...out, ...settings };
}

async function dockerComposeConfig(file: string, settings: Record<string, string> = SETTINGS) {
  const r = await runCommand([DOCKER_COMPOSE, "--project-directory", DIR, "-f", join(DIR, file), "config"], env(settings), 60_000);
  return { ...r, config: r.code === 0 ? parse(r.stdout) : undefined };
}

interface Port {
  target: number;
  published: number | string;
  protocol?: string;
  host_ip?: string;
}

/** docker-compose 1.29 writes a port with a host address in the short form ("127.0.0.1:4041:4041/tcp"): read back as the long one. */
function ports(list: (Port | string)[]): Port[] {
  return list.map((p) => {
    if (typeof p !== "string") return p;
    const m = /^(?:([\d.]+):)?(\d+):(\d+)(?:\/(tcp|udp))?$/.exec(p);
    if (!m) throw new Error(`a port line docker-compose wrote that the test cannot read: ${p}`);
    return { host_ip: m[1], published: Number(m[2]), target: Number(m[3]), protocol: m[4] };
  });
}

describe.skipIf(!!noDockerCompose)("docker-compose config: each file is a valid compose file", () => {
  test("compose.yaml: one server on 80, 443 and 53, the admin API on the host's loopback only, hardened, its data in a volume", async () => {
    const { code, stderr, config } = await dockerComposeConfig("compose.yaml");
    expect(`${code} ${stderr}`).toBe("0 ");
    const burrow = config.services.burrow;
    expect(Object.keys(config.services)).toEqual(["burrow"]);
    expect(burrow.image).toBe("burrow:latest");
    expect(burrow.restart).toBe("unless-stopped");
    expect(burrow.environment).toMatchObject({ BURROW_DOMAIN: SETTINGS.BURROW_DOMAIN, BURROW_ACME_EMAIL: SETTINGS.BURROW_ACME_EMAIL, BURROW_HTTP_PORT: "80", BURROW_ADMIN_HOST: "0.0.0.0" });
    const published = ports(burrow.ports);
    const on = (target: number, protocol = "tcp") => published.filter((p) => p.target === target && (p.protocol ?? "tcp") === protocol);
    for (const [target, protocol] of [[80, "tcp"], [443, "tcp"], [53, "udp"], [53, "tcp"], [4042, "tcp"]] as const) {
      expect(on(target, protocol).map((p) => [p.published, p.host_ip])).toEqual([[target, undefined]]);
    }
    expect(on(4041).map((p) => [p.published, p.host_ip])).toEqual([[4041, "127.0.0.1"]]);
    // every port of the tunnels' range, both protocols
    expect(published.filter((p) => p.target >= 20000 && p.target <= 20099)).toHaveLength(200);
    expect(burrow.volumes).toEqual(["burrow-data:/data:rw"]);
    expect(Object.keys(config.volumes)).toEqual(["burrow-data"]);
    expect(burrow.sysctls).toEqual({ "net.ipv4.ip_unprivileged_port_start": "0" });
    expect(burrow.cap_drop).toEqual(["ALL"]);
    expect(burrow.security_opt).toEqual(["no-new-privileges:true"]);
    expect(burrow.read_only).toBe(true);
    expect(burrow.tmpfs).toEqual(["/tmp"]);
    expect(burrow.stop_grace_period).toBe("30s");
    expect(burrow.healthcheck).toBeUndefined();
  });

  test("compose.yaml refuses to start without the domain or the ACME address, saying which", async () => {
    const { BURROW_DOMAIN: _, ...noDomain } = SETTINGS;
    const r = await dockerComposeConfig("compose.yaml", noDomain);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("set BURROW_DOMAIN, e.g. tunnels.example.com");
    const { BURROW_ACME_EMAIL: __, ...noEmail } = SETTINGS;
    expect((await dockerComposeConfig("compose.yaml", noEmail)).stderr).toContain("set BURROW_ACME_EMAIL");
  });

  test("compose.cluster.yaml: a node on PostgreSQL with the cluster's settings, no direct port, the admin API on loopback; the database on loopback unless told", async () => {
    const { code, stderr, config } = await dockerComposeConfig("compose.cluster.yaml");
    expect(`${code} ${stderr}`).toBe("0 ");
    const node = config.services.burrow;
    expect(node.environment).toMatchObject({
      BURROW_DATABASE_URL: SETTINGS.BURROW_DATABASE_URL,
      BURROW_CLUSTER_SECRET: SETTINGS.BURROW_CLUSTER_SECRET,
      BURROW_NODE_ID: "n1",
      BURROW_NODE_URL: SETTINGS.BURROW_NODE_URL,
      BURROW_PUBLIC_URL: SETTINGS.BURROW_PUBLIC_URL,
      BURROW_AGENT_PORT: "off",
    });
    expect(ports(node.ports).filter((p) => p.target === 4041).map((p) => p.host_ip)).toEqual(["127.0.0.1"]);
    expect(ports(config.services.postgres.ports).map((p) => [p.target, p.host_ip])).toEqual([[5432, "127.0.0.1"]]);
    expect(config.services.postgres.environment.POSTGRES_PASSWORD_FILE).toBe("/run/secrets/postgres_password");
    const { BURROW_CLUSTER_SECRET: _, ...noSecret } = SETTINGS;
    expect((await dockerComposeConfig("compose.cluster.yaml", noSecret)).stderr).toContain("set BURROW_CLUSTER_SECRET");
  });

  test("compose.agent.yaml: the agent beside its app, its token from a secret file, no health check of a server's, nothing published", async () => {
    const { code, stderr, config } = await dockerComposeConfig("compose.agent.yaml");
    expect(`${code} ${stderr}`).toBe("0 ");
    const agent = config.services["burrow-agent"];
    expect(agent.command).toEqual(["http", "web:80", "--subdomain", "web"]);
    expect(agent.environment).toEqual({ BURROW_SERVER: SETTINGS.BURROW_SERVER, BURROW_TOKEN_FILE: "/run/secrets/burrow_token", BURROW_LOG: "text" });
    expect(agent.secrets).toEqual([{ source: "burrow_token" }]);
    expect(config.secrets.burrow_token.file).toBe(join(DIR, "burrow-token.txt"));
    expect(agent.healthcheck).toEqual({ test: ["NONE"] });
    expect(agent.read_only).toBe(true);
    for (const service of Object.values(config.services) as { ports?: unknown }[]) expect(service.ports).toBeUndefined();
  });
});

describe.skipIf(!!noPodman)("podman-compose --dry-run up: the podman commands the files become", () => {
  let pm: Podman;
  beforeAll(() => {
    pm = startPodman();
  });
  afterAll(async () => {
    await pm?.close();
  });

  /** The `podman run` lines podman-compose would run, by container name. */
  async function runLines(file: string, settings: Record<string, string> = SETTINGS): Promise<Map<string, string>> {
    // its volumes and networks go to the test's own storage and network directory
    const r = await runCommand(
      ["podman-compose", "--project-name", "burrowtest", "--podman-args", pm.globalArgs.join(" "), "--dry-run", "-f", join(DIR, file), "up", "--detach"],
      { ...env(settings), ...pm.env, ...settings },
      60_000,
    );
    if (r.code !== 0) throw new Error(`podman-compose failed: ${r.stdout}\n${r.stderr}`);
    const lines = (r.stdout + r.stderr).split("\n").filter((l) => l.startsWith("podman run "));
    return new Map(lines.map((l) => [/--name=(\S+)/.exec(l)![1]!, l]));
  }

  test("compose.yaml: the sysctl with its value, no capability, a read-only root, the admin API on loopback, and the image's health check (none through a shell)", async () => {
    const run = (await runLines("compose.yaml")).get("burrowtest_burrow_1")!;
    for (const flag of [
      "--sysctl net.ipv4.ip_unprivileged_port_start=0",
      "--cap-drop ALL",
      "--security-opt no-new-privileges:true",
      "--read-only",
      "--tmpfs /tmp",
      "-v burrowtest_burrow-data:/data",
      "-p 80:80",
      "-p 443:443",
      "-p 53:53/udp",
      "-p 53:53/tcp",
      "-p 127.0.0.1:4041:4041",
      "--restart unless-stopped",
      "-e BURROW_ADMIN_HOST=0.0.0.0",
    ]) expect(run).toContain(` ${flag} `);
    expect(run).not.toContain("--healthcheck-command");
    expect([...run.matchAll(/-p (\S*4041\S*)/g)].map((m) => m[1])).toEqual(["127.0.0.1:4041:4041"]);
    expect(run).not.toContain("${");
    expect(run.endsWith(" burrow:latest")).toBe(true);
  });

  test("compose.agent.yaml: the token file mounted read-only, no health check, the app's name as the target", async () => {
    const runs = await runLines("compose.agent.yaml");
    const agent = runs.get("burrowtest_burrow-agent_1")!;
    // the file beside the compose file (podman-compose runs from there)
    expect(agent).toContain(" --volume ./burrow-token.txt:/run/secrets/burrow_token:ro,rprivate,rbind ");
    expect(agent).toContain(" -e BURROW_TOKEN_FILE=/run/secrets/burrow_token ");
    expect(agent).toContain(" --no-healthcheck ");
    expect(agent.endsWith(" burrow:latest http web:80 --subdomain web")).toBe(true);
    expect(runs.get("burrowtest_web_1")).not.toContain(" -p ");
  });
});
