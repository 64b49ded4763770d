/**
 * conn.geo.* through the real server started with --geoip-db on a real
 * MaxMind DB (written by MaxMind's own writer, checked with mmdblookup:
 * test/harness/geoip-db.ts), the real agent's --policy-file and curl:
 * "deny by country" and the place interpolated into a request header and a
 * response header, for the visitor's own address and for the client a
 * trusted proxy names (X-Forwarded-For), on HTTP/1.1 and HTTP/2, and a tcp
 * tunnel's on_tcp_connect; an address the DB does not know reads empty.
 * A request relayed from another node is judged on the visitor's address
 * the first node saw. The file read again when it is replaced (a bad one
 * keeps the one before).
 * A server without the flag refuses such a policy at load: the admin API's
 * POST /api/policies (400) and a tunnel's handshake; and a bad --geoip-db
 * is a usage error (exit 2) naming the flag.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { connect } from "node:net";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { refusal, startAgent, type TestAgent } from "../harness/agent.ts";
import { signedIn } from "../harness/admin.ts";
import { startTwoNodes, type TwoNodes } from "../harness/cluster.ts";
import { writeCityDb, writeNotADb, type CityRecord } from "../harness/geoip-db.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";
import { waitUntil } from "../harness/wait.ts";
import { curl } from "./curl.ts";
import { echo, type Echoed } from "./rig.ts";

setDefaultTimeout(60_000);

const BERLIN: CityRecord = {
  country: { iso_code: "DE", names: { en: "Germany" } },
  city: { names: { en: "Berlin" } },
  subdivisions: [{ iso_code: "BE", names: { en: "Land Berlin" } }],
  location: { latitude: 52.52, longitude: 13.405, accuracy_radius: 20 },
};
const PARIS: CityRecord = { country: { iso_code: "FR", names: { en: "France" } }, city: { names: { en: "Paris" } } };
const STRONGSVILLE: CityRecord = {
  country: { iso_code: "US", names: { en: "United States" } },
  city: { names: { en: "Strongsville" } },
  subdivisions: [{ iso_code: "OH", names: { en: "Ohio" } }],
  location: { latitude: 41.3, longitude: -81.8, accuracy_radius: 5 },
};
/** 127.0.0.1 is in Berlin, 127.0.0.2 in Paris, 198.51.100.0/24 (behind the proxy 127.0.0.3) in Ohio; 127.0.0.3 and .4 nowhere. */
const PLACES = { "127.0.0.1/32": BERLIN, "127.0.0.2/32": PARIS, "198.51.100.0/24": STRONGSVILLE };

const POLICY = `
on_http_request:
  - name: no visitors from France
    expressions: ["conn.geo.country_code == 'FR'"]
    actions: [{ type: deny, config: { status_code: 451 } }]
  - actions:
      - type: add-headers
        config:
          headers:
            x-geo: "\${conn.geo.country_code}|\${conn.geo.country}|\${conn.geo.city}|\${conn.geo.subdivision}|\${conn.geo.latitude}|\${conn.geo.longitude}|\${conn.geo.radius}"
on_http_response:
  - actions: [{ type: add-headers, config: { headers: { x-visitor-city: "city=\${conn.geo.city}" } } }]
`;
const TCP_POLICY = `on_tcp_connect:\n  - expressions: ["conn.geo.country_code == 'FR'"]\n    actions: [{ type: deny }]\n`;

const dir = mkdtempSync(join(tmpdir(), "burrow-geoip-"));
const dbPath = join(dir, "GeoLite2-City.mmdb");
let rig: Rig;
let web: TestAgent;
let tcp: TestAgent;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: echo });
const echoService = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.write("ready\n"), data: (s, d) => void s.write(d) } });

beforeAll(async () => {
  writeCityDb(dbPath, PLACES);
  writeFileSync(join(dir, "policy.yml"), POLICY);
  writeFileSync(join(dir, "tcp.yml"), TCP_POLICY);
  // the database from the environment, as a service unit would give it
  rig = await withServer({ server: { args: ["--trusted-proxies", "127.0.0.3/32", "--geoip-check-interval", "1", "--geoip-cache", "500"], env: { BURROW_GEOIP_DB: dbPath } } });
  web = await rig.startAgent({ kind: "http", target: upstream.port!, args: ["--subdomain", "geo", "--policy-file", join(dir, "policy.yml")] });
  tcp = await rig.startAgent({ kind: "tcp", target: echoService.port, args: ["--policy-file", join(dir, "tcp.yml")] });
});

afterAll(async () => {
  await rig?.close();
  upstream.stop(true);
  echoService.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

const url = (path = "/") => `http://${web.subdomain}.localhost:${rig.server.edgePort}${path}`;
/** The place the service was told (x-geo) and the response's header, for a request from `from`. */
async function visit(from: string, args: string[] = []) {
  const r = await curl(url("/where"), ["--interface", from, ...args]);
  return { status: r.status, geo: r.status === 200 ? (JSON.parse(r.body) as Echoed).headers["x-geo"] : undefined, city: r.headers["x-visitor-city"] };
}

describe("an http tunnel's policy on a server with --geoip-db", () => {
  test("a visitor from a mapped address: every variable, in the request and in the response", async () => {
    expect(await visit("127.0.0.1")).toEqual({ status: 200, geo: "DE|Germany|Berlin|Land Berlin|52.52|13.405|20", city: "city=Berlin" });
  });

  test("deny by country: a visitor from France gets the deny, on HTTP/1.1 and HTTP/2", async () => {
    expect((await visit("127.0.0.2")).status).toBe(451);
    expect((await visit("127.0.0.2", ["--http2-prior-knowledge"])).status).toBe(451);
    const h2 = await visit("127.0.0.1", ["--http2-prior-knowledge"]);
    expect(h2).toEqual({ status: 200, geo: "DE|Germany|Berlin|Land Berlin|52.52|13.405|20", city: "city=Berlin" });
  });

  test("an address the database does not know: every value empty, nothing denied", async () => {
    expect(await visit("127.0.0.4")).toEqual({ status: 200, geo: "||||||", city: "city=" });
  });

  test("behind a trusted proxy the client it names is looked up; a visitor's own X-Forwarded-For is not believed", async () => {
    expect(await visit("127.0.0.3", ["-H", "X-Forwarded-For: 198.51.100.7"])).toEqual({ status: 200, geo: "US|United States|Strongsville|Ohio|41.3|-81.8|5", city: "city=Strongsville" });
    expect((await visit("127.0.0.3", ["-H", "X-Forwarded-For: 127.0.0.2"])).status).toBe(451);
    // 127.0.0.2 is no proxy: it is in France whatever it says
    expect((await visit("127.0.0.2", ["-H", "X-Forwarded-For: 198.51.100.7"])).status).toBe(451);
  });
});

/** What a tcp visitor from `from` gets back for "ping": the echo, or nothing before the edge closes. */
function exchange(from: string): Promise<string> {
  return new Promise((resolve) => {
    let got = "";
    const sock = connect({ host: "127.0.0.1", port: tcp.port!, localAddress: from }, () => sock.write("ping"));
    const timer = setTimeout(() => (sock.destroy(), resolve(`timeout:${got}`)), 10_000);
    sock.on("data", (d) => {
      got += d.toString();
      if (got.includes("ping")) (clearTimeout(timer), sock.end(), resolve(got));
    });
    sock.on("close", () => (clearTimeout(timer), resolve(`closed:${got}`)));
    sock.on("error", () => {});
  });
}

describe("a tcp tunnel's on_tcp_connect", () => {
  test("denies a visitor by country; others are carried", async () => {
    expect(await exchange("127.0.0.2")).toBe("closed:");
    expect(await exchange("127.0.0.1")).toBe("ready\nping");
  });
});

describe("the operator's policies on a server with --geoip-db", () => {
  test("POST /api/policies takes one that reads conn.geo.*", async () => {
    const made = await rig.api.post("/api/policies", { name: "geo-ok", policy: "on_http_request:\n  - expressions: [\"conn.geo.country_code == 'ZZ'\"]\n    actions: [{ type: deny }]\n" });
    expect(made.status).toBe(201);
    expect((await rig.api.delete(`/api/policies/${made.body.id}`)).status).toBe(200);
  });
});

describe("a request relayed from another node", () => {
  let cluster: TwoNodes | undefined;
  let agent: TestAgent | undefined;
  beforeAll(async () => {
    // both nodes read the database (the harness's nodes take the test's environment)
    process.env.BURROW_GEOIP_DB = dbPath;
    try {
      cluster = await startTwoNodes({ ids: ["g1", "g2"], secret: "geoip-relay-secret-0123456789abcdef" });
    } finally {
      delete process.env.BURROW_GEOIP_DB;
    }
    const api = await signedIn(cluster.nodes[0]!);
    const token = await api.createToken(await api.createUser("geo-relay", { skip_warning: true }));
    agent = await startAgent({ kind: "http", target: upstream.port!, server: cluster.nodes[0]!.edgeUrl, token, args: ["--subdomain", "georelay", "--policy-file", join(dir, "policy.yml")] });
  }, 60_000);
  afterAll(async () => {
    await agent?.stop();
    await cluster?.stop();
  });

  test("the node that holds the tunnel judges the address the visitor came from to the other", async () => {
    const other = cluster!.nodes[1]!;
    const at = `http://georelay.localhost:${other.edgePort}/where`;
    expect((await curl(at, ["--interface", "127.0.0.2"])).status).toBe(451);
    const r = await curl(at, ["--interface", "127.0.0.1"]);
    expect(r.status).toBe(200);
    expect((JSON.parse(r.body) as Echoed).headers["x-geo"]).toBe("DE|Germany|Berlin|Land Berlin|52.52|13.405|20");
    expect(r.headers["x-visitor-city"]).toBe("city=Berlin");
  });
});

describe("the database read again when its file is replaced", () => {
  test("a new file answers within seconds; a file that does not read keeps the one before", async () => {
    const next = join(dir, "next.mmdb");
    writeCityDb(next, { ...PLACES, "127.0.0.1/32": PARIS });
    renameSync(next, dbPath);
    await waitUntil(async () => (await visit("127.0.0.1")).status === 451, 30_000, "the replaced database to be read");
    writeNotADb(next);
    renameSync(next, dbPath);
    await rig.server.output.waitFor(/GeoIP database changed but does not read/, 30_000);
    expect((await visit("127.0.0.1")).status).toBe(451);
    expect((await visit("127.0.0.4")).status).toBe(200);
  });
});

describe("a server without --geoip-db", () => {
  let bare: TestServer;
  let plain: Rig;
  beforeAll(async () => {
    bare = await startServer();
    plain = await withServer({ server: bare });
  });
  afterAll(async () => {
    await plain?.close();
    await bare?.stop();
  });

  test("POST /api/policies refuses a policy that reads conn.geo.*: 400, the API's error shape, the variable and the flag named", async () => {
    const res = await plain.api.post("/api/policies", { name: "geo", policy: POLICY });
    expect(res.status).toBe(400);
    expect(Object.keys(res.body)).toEqual(["error"]);
    expect(res.body.error).toContain("CEL_TYPE");
    expect(res.body.error).toContain("conn.geo.country_code");
    expect(res.body.error).toContain("--geoip-db");
    expect((await plain.api.get("/api/policies")).body).toEqual([]);
  });

  test("a tunnel's --policy-file that reads conn.geo.* is refused at the handshake", async () => {
    const said = await refusal({ server: bare.edgeUrl, token: plain.token, kind: "tcp", target: echoService.port, args: ["--policy-file", join(dir, "tcp.yml")] });
    expect(said).toContain("conn.geo.country_code");
    expect(said).toContain("--geoip-db");
  });
});

describe("a bad --geoip-db", () => {
  /** `burrow server` with these arguments: its exit code and what it said, bounded in time. */
  async function serverRun(args: string[], env: Record<string, string> = {}) {
    const data = mkdtempSync(join(tmpdir(), "burrow-geoip-bad-"));
    try {
      const proc = Bun.spawn([...burrowCommand(), "server", "--host", "127.0.0.1", "--admin-port", "0", "--http-port", "0", "--data-dir", data, ...args], {
        env: { ...process.env, BURROW_ADMIN_USERNAME: "admin", BURROW_ADMIN_PASSWORD: "correct-horse-battery", ...env },
        stdout: "pipe",
        stderr: "pipe",
        timeout: 20_000,
      });
      const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      return { code, said: out + err };
    } finally {
      rmSync(data, { recursive: true, force: true });
    }
  }

  test("no such file, or a file that is not a MaxMind DB: exit 2 naming the flag, before anything listens", async () => {
    const missing = await serverRun(["--geoip-db", join(dir, "missing.mmdb")]);
    expect(missing.code).toBe(2);
    expect(missing.said).toContain("--geoip-db: no such file");
    const csv = join(dir, "places.csv");
    writeNotADb(csv);
    for (const run of [await serverRun(["--geoip-db", csv]), await serverRun([], { BURROW_GEOIP_DB: csv })]) {
      expect(run.code).toBe(2);
      expect(run.said).toContain("--geoip-db");
      expect(run.said).toContain("not a MaxMind DB file");
      expect(run.said).not.toContain("admin api listening");
    }
  });
});
