/**
 * The container image (build/image.ts, what `npm run image` and `npm run
 * release` make), built once for this machine's architecture from the
 * compiled executable and run with podman, on storage of the test's own:
 *
 * - its archive loads (`podman load`), and its config says how it runs;
 * - it holds no shell, nothing else to run, and its size is bounded;
 * - the server starts as uid 65532 from an empty volume, binds port 80
 *   with no capability at all, with a read-only root, and answers /readyz
 *   through a port published on the host's loopback only; the image's
 *   HEALTHCHECK passes;
 * - an agent outside the container opens an http tunnel and a visitor gets
 *   the service's answer; an agent in the image, beside a service on a
 *   network of their own, takes its token from a file;
 * - SIGTERM (`podman stop`) drains a request in flight and ends it within
 *   the drain timeout; a new container on the same volume still has the
 *   user and the token;
 * - by default the admin API stays on the container's loopback, and the
 *   first admin's password is printed once in the log.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildInfo } from "../../build/compile.ts";
import { buildImage, imageFileName, mib, type BuiltImage } from "../../build/image.ts";
import { NONROOT, type ImageArch } from "../../build/image-rootfs.ts";
import { AdminClient } from "../harness/admin.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { compiledBurrow } from "../harness/compiled.ts";
import { layerFiles } from "../harness/oci-archive.ts";
import { podmanSkipReason, runCommand, startPodman, type Podman } from "../harness/podman.ts";
import { freeRange } from "../harness/ports.ts";
import { ADMIN_PASSWORD } from "../harness/server.ts";

const version = (JSON.parse(readFileSync(join(import.meta.dir, "..", "..", "package.json"), "utf8")) as { version: string }).version;
const here: ImageArch = process.arch === "arm64" ? "arm64" : "amd64";
const skip = podmanSkipReason();
if (skip) console.error(`container image tests skipped: ${skip}`);

let pm: Podman;
let work: string;
let executable: string;
let image: BuiltImage;
/** What podman load said. */
let loadedAs = "";
/** The image as podman names it once loaded with its HEALTHCHECK (Docker's format). */
const IMAGE = `localhost/burrow:${version}`;
/** The network the server, the service and the agent share, as compose's default network. */
const NETWORK = "burrow-test";

/** A service on the host for the agent outside: its answer, and a slow path that tells when it is asked. */
let slowAsked: () => void = () => {};
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    const path = new URL(req.url).pathname;
    if (path === "/slow") {
      slowAsked();
      await Bun.sleep(1_500);
      return new Response("slow but whole");
    }
    return new Response(`the host's service says ${path}`);
  },
});

beforeAll(async () => {
  if (skip) return;
  pm = startPodman();
  work = mkdtempSync(join(tmpdir(), "burrow-image-test-"));
  executable = await compiledBurrow(join(work, "exe"));
  image = await buildImage({ executable, arch: here, version, info: buildInfo(), outfile: join(work, imageFileName(version, here)) });
  // as users load it (OCI), then as npm run image does for podman: the same image (one id) in Docker's
  // format, whose HEALTHCHECK podman reads (from an OCI image it reads none); the last load's format is the one podman shows
  loadedAs = await pm.ok(["load", "-i", image.file]);
  await pm.ok(["pull", `docker-archive:${image.file}`]);
  await pm.ok(["network", "create", NETWORK]);
}, 300_000);

afterAll(async () => {
  upstream.stop(true);
  await pm?.close();
});

/** The container's process as the host sees it: its uid and gid. */
async function processIds(container: string): Promise<{ uid: string; gid: string }> {
  const pid = (await pm.ok(["inspect", container, "--format", "{{.State.Pid}}"])).trim();
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return { uid: /^Uid:\s+(.*)$/m.exec(status)![1]!.trim(), gid: /^Gid:\s+(.*)$/m.exec(status)![1]!.trim() };
}

/** The host port a container's port is published on, and the address it is bound to. */
async function published(container: string, port: string): Promise<{ host: string; port: number }> {
  const line = (await pm.ok(["port", container, port])).trim().split("\n")[0]!;
  const m = /^(.*):(\d+)$/.exec(line);
  if (!m) throw new Error(`podman port ${container} ${port}: ${line}`);
  return { host: m[1]!, port: Number(m[2]) };
}

describe.skipIf(!!skip)("the image", () => {
  test("its archive is an OCI layout that podman load takes as burrow:<version>; its config says how it runs", async () => {
    expect(loadedAs).toContain(`Loaded image: docker.io/library/burrow:${version}`);
    const [oci] = JSON.parse(await pm.ok(["image", "inspect", `docker.io/library/burrow:${version}`]));
    expect(oci.Architecture).toBe(here);
    expect(oci.Os).toBe("linux");
    expect(oci.Config).toMatchObject({
      User: `${NONROOT}:${NONROOT}`,
      Entrypoint: ["/usr/local/bin/burrow"],
      Cmd: ["server"],
      Volumes: { "/data": {} },
      WorkingDir: "/home/nonroot",
      StopSignal: "SIGTERM",
    });
    expect(oci.Config.Env).toContain("BURROW_DATA_DIR=/data");
    expect(Object.keys(oci.Config.ExposedPorts).sort()).toEqual(["4042/tcp", "443/tcp", "53/tcp", "53/udp", "8080/tcp"]);
    expect(oci.Labels["org.opencontainers.image.version"]).toBe(version);
    // the HEALTHCHECK: burrow asking itself, no shell
    const [docker] = JSON.parse(await pm.ok(["image", "inspect", IMAGE]));
    expect(docker.Id).toBe(oci.Id);
    expect(docker.Healthcheck.Test).toEqual(["CMD", "/usr/local/bin/burrow", "server", "health"]);
  });

  test("no shell and nothing else to run: podman run --entrypoint /bin/sh fails; the layer's only executables are burrow and the C library's loader", async () => {
    for (const shell of ["/bin/sh", "/bin/bash", "/bin/busybox"]) {
      const r = await pm.run(["run", "--rm", "--entrypoint", shell, IMAGE, "-c", "id"]);
      expect(r.code).toBe(127);
      expect(r.stderr).toContain(`${shell}: no such file or directory`);
    }
    const files = await layerFiles(image.file);
    const executables = files.filter((f) => f.type === "file" && (f.mode & 0o111) !== 0).map((f) => f.name);
    expect(executables.sort()).toEqual([`usr/lib/${here === "amd64" ? "x86_64" : "aarch64"}-linux-gnu/${here === "amd64" ? "ld-linux-x86-64.so.2" : "ld-linux-aarch64.so.1"}`, "usr/local/bin/burrow"]);
    expect(files.filter((f) => f.name.startsWith("bin/") || f.name.startsWith("sbin/") || f.name.startsWith("usr/bin/"))).toEqual([]);
    expect(files.find((f) => f.name === "data/")).toMatchObject({ uid: NONROOT, gid: NONROOT, mode: 0o700 });
    expect(files.find((f) => f.name === "tmp/")).toMatchObject({ uid: 0, mode: 0o1777 });
  });

  test("its size, next to the executable's, is printed and bounded", async () => {
    const exeBytes = statSync(executable).size;
    const [info] = JSON.parse(await pm.ok(["image", "inspect", IMAGE]));
    console.log(`image linux/${here}: ${mib(image.layerBytes)} compressed, ${mib(image.rootfsBytes)} of files (podman says ${mib(info.Size)}); the executable: ${mib(exeBytes)}`);
    // the executable is nearly all of it: the C library, certificates and time zones add a few MiB
    expect(image.rootfsBytes - exeBytes).toBeGreaterThan(0);
    expect(image.rootfsBytes - exeBytes).toBeLessThan(16 * 1024 * 1024);
    expect(image.layerBytes).toBeLessThan(exeBytes);
  });
});

describe.skipIf(!!skip)("a server in the image", () => {
  const agentPort = () => directPort;
  let directPort = 0;
  let edge = 0;
  let admin = "";
  let token = "";

  /** Runs the server as compose.yaml does: port 80 by the sysctl, no capability, a read-only root, the admin API on the host's loopback. */
  async function runServer(name: string, env: Record<string, string>): Promise<void> {
    await pm.ok([
      "run", "--detach", "--name", name, "--network", NETWORK, "--network-alias", "burrow",
      "--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp",
      "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
      "--sysctl", "net.ipv4.ip_unprivileged_port_start=0",
      "--volume", "burrow-data:/data",
      "--env", "BURROW_HTTP_PORT=80", "--env", "BURROW_ADMIN_HOST=0.0.0.0", "--env", `BURROW_AGENT_PORT=${agentPort()}`, "--env", "BURROW_DRAIN_TIMEOUT=5",
      ...Object.entries(env).flatMap(([k, v]) => ["--env", `${k}=${v}`]),
      "--publish", "127.0.0.1::80", "--publish", "127.0.0.1::4041", "--publish", `127.0.0.1:${agentPort()}:${agentPort()}`,
      IMAGE,
    ]);
    const { output } = pm.follow(name);
    await output.waitFor(/admin api listening/, 30_000);
    edge = (await published(name, "80")).port;
    admin = `http://127.0.0.1:${(await published(name, "4041")).port}`;
  }

  beforeAll(async () => {
    directPort = freeRange(1).first;
    await pm.ok(["volume", "create", "burrow-data"]);
    await runServer("burrow-1", { BURROW_ADMIN_PASSWORD: ADMIN_PASSWORD });
  }, 120_000);

  test("starts as uid 65532 from an empty volume, which then holds its database; /readyz answers through the host's loopback only", async () => {
    expect(await processIds("burrow-1")).toEqual({ uid: `${NONROOT}\t${NONROOT}\t${NONROOT}\t${NONROOT}`, gid: `${NONROOT}\t${NONROOT}\t${NONROOT}\t${NONROOT}` });
    const volume = (await pm.ok(["volume", "inspect", "burrow-data", "--format", "{{.Mountpoint}}"])).trim();
    // the volume took the image's /data: the server's user's alone, as the server makes a data dir
    expect(statSync(volume)).toMatchObject({ uid: NONROOT, gid: NONROOT });
    expect(statSync(volume).mode & 0o777).toBe(0o700);
    expect(statSync(join(volume, "burrow.db")).uid).toBe(NONROOT);
    for (const port of ["80", "4041", String(agentPort())]) expect((await published("burrow-1", port)).host).toBe("127.0.0.1");
    const ready = await fetch(`${admin}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: "ready" });
    // the image's HEALTHCHECK: burrow server health, run in the container
    const health = await pm.run(["healthcheck", "run", "burrow-1"]);
    expect(health.code).toBe(0);
  });

  test("an agent outside the container opens an http tunnel through the published ports, and a visitor gets the service's answer", async () => {
    const api = new AdminClient(admin);
    expect((await api.login()).status).toBe(200);
    token = await api.createToken(await api.createUser("boxed"));
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: `http://127.0.0.1:${edge}`, token, executable, args: ["--subdomain", "outside"] });
    expect(agent.publicUrl).toBe("http://outside.localhost");
    const res = await tunnelFetch(edge, "outside", "/hello");
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("the host's service says /hello");
  }, 60_000);

  test("the agent in the image, beside a service on their network, with its token from a file only its user may read", async () => {
    // the service: another container of the image (its admin API answers /healthz), as an app beside its agent
    await pm.ok(["run", "--detach", "--name", "web", "--network", NETWORK, "--env", "BURROW_ADMIN_HOST=0.0.0.0", IMAGE]);
    const tokenFile = join(work, "burrow-token.txt");
    writeFileSync(tokenFile, `${token}\n`);
    chownSync(tokenFile, NONROOT, NONROOT);
    chmodSync(tokenFile, 0o400);
    await pm.ok([
      "run", "--detach", "--name", "agent", "--network", NETWORK,
      "--read-only", "--read-only-tmpfs=false", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--health-cmd", "none",
      "--volume", `${tokenFile}:/run/secrets/burrow_token:ro`,
      "--env", "BURROW_SERVER=http://burrow:80", "--env", "BURROW_TOKEN_FILE=/run/secrets/burrow_token", "--env", "BURROW_LOG=text",
      IMAGE, "http", "web:4041", "--subdomain", "beside",
    ]);
    const { output } = pm.follow("agent");
    expect(await output.waitFor(/^Forwarding/, 30_000)).toMatch(/^Forwarding {2}http:\/\/beside\.localhost -> web:4041 +\(user boxed\)$/);
    const res = await tunnelFetch(edge, "beside", "/healthz");
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("ok\n");
    expect(output.text()).not.toContain(token);
    await pm.ok(["rm", "--force", "--time", "0", "agent", "web"]);
  }, 90_000);

  test("SIGTERM (podman stop) drains: the request in flight gets its answer, and the server ends within the drain timeout, exit 0", async () => {
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: `http://127.0.0.1:${edge}`, token, executable, args: ["--subdomain", "draining"] });
    const asked = new Promise<void>((resolve) => (slowAsked = resolve));
    const visit = tunnelFetch(edge, "draining", "/slow");
    await asked;
    const started = performance.now();
    const stopped = pm.run(["stop", "--time", "30", "burrow-1"]);
    const res = await visit;
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("slow but whole");
    expect((await stopped).code).toBe(0);
    const took = performance.now() - started;
    // BURROW_DRAIN_TIMEOUT is 5 s; the podman stop's own 30 s never came into play
    expect(took).toBeLessThan(5_000 + 5_000);
    expect((await pm.ok(["inspect", "burrow-1", "--format", "{{.State.ExitCode}}"])).trim()).toBe("0");
    expect(await pm.ok(["logs", "burrow-1"])).toMatch(/shutting down signal=SIGTERM/);
  }, 60_000);

  test("a new container on the same volume still has the user and the token (the volume holds the database)", async () => {
    await pm.ok(["rm", "burrow-1"]);
    // no BURROW_ADMIN_PASSWORD now: the admin, too, is the volume's
    await runServer("burrow-2", {});
    expect(await processIds("burrow-2")).toMatchObject({ uid: `${NONROOT}\t${NONROOT}\t${NONROOT}\t${NONROOT}` });
    const api = new AdminClient(admin);
    expect((await api.login()).status).toBe(200);
    const users = await api.get("/api/users");
    expect(users.body.map((u: { username: string }) => u.username)).toContain("boxed");
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: `http://127.0.0.1:${edge}`, token, executable, args: ["--subdomain", "again"] });
    const res = await tunnelFetch(edge, "again", "/after-restart");
    expect(await res.text()).toBe("the host's service says /after-restart");
    // a backup while it runs, with the image's burrow (no shell): into the volume
    const backup = await pm.run(["exec", "burrow-2", "burrow", "server", "backup", "/data/copy.db"]);
    expect(backup.stdout).toMatch(/^backed up \/data\/burrow\.db to \/data\/copy\.db \(\d+ bytes\)\n$/);
    await pm.ok(["stop", "--time", "30", "burrow-2"]);
  }, 90_000);
});

describe.skipIf(!!skip)("the image's defaults", () => {
  test("the admin API stays on the container's loopback: its published port answers nothing, the health check inside passes; the first admin's password is printed once", async () => {
    await pm.ok(["run", "--detach", "--name", "plain", "--publish", "127.0.0.1::8080", "--publish", "127.0.0.1::4041", IMAGE]);
    const { output } = pm.follow("plain");
    await output.waitFor(/admin api listening/, 30_000);
    const publicPort = (await published("plain", "8080")).port;
    // the public port answers: the landing page of its domain (localhost, the default)
    const landing = await fetch(`http://127.0.0.1:${publicPort}/`, { headers: { host: `localhost:${publicPort}` } });
    expect(landing.status).toBe(200);
    const adminPort = (await published("plain", "4041")).port;
    const reached = await fetch(`http://127.0.0.1:${adminPort}/readyz`, { signal: AbortSignal.timeout(10_000) }).then(
      (r) => `answered ${r.status}`,
      (err: Error) => `no answer: ${err.name}`,
    );
    expect(reached).toMatch(/^no answer/);
    const health = await pm.run(["healthcheck", "run", "plain"]);
    expect(`${health.code} ${health.stdout} ${health.stderr}`).toMatch(/^0 /);
    const password = output.lines.filter((l) => /Admin user 'admin' created with password: \S{24}$/.test(l));
    expect(password).toHaveLength(1);
    await pm.ok(["rm", "--force", "--time", "0", "plain"]);
  }, 60_000);

  test("port 80 as uid 65532 needs the sysctl compose.yaml sets: without it, and with no capability, the server cannot listen and exits 1", async () => {
    const r = await pm.run(["run", "--rm", "--cap-drop", "ALL", "--env", "BURROW_HTTP_PORT=80", IMAGE], 60_000);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("burrow: cannot listen");
  }, 60_000);
});

// last: it tags burrow:<version> anew, which the tests above run
describe.skipIf(!!skip)("npm run image", () => {
  test("builds the archive and loads it into podman as burrow:<version>, burrow:latest and burrow:<version>-<arch>, HEALTHCHECK kept", async () => {
    const outdir = join(work, "npm-run-image");
    const run = await runCommand([process.execPath, join(import.meta.dir, "..", "..", "build", "image.ts"), "--arch", here, "--outdir", outdir], pm.env, 240_000);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`| linux/${here} |`);
    expect(run.stdout).toContain(`loaded into podman: burrow:${version}, burrow:latest, burrow:${version}-${here}`);
    for (const name of [`burrow:${version}`, "burrow:latest", `burrow:${version}-${here}`]) {
      const [loaded] = JSON.parse(await pm.ok(["image", "inspect", name]));
      expect(loaded.Architecture).toBe(here);
      expect(loaded.Healthcheck.Test).toEqual(["CMD", "/usr/local/bin/burrow", "server", "health"]);
    }
  }, 300_000);
});
