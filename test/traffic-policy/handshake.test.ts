/**
 * A tunnel's own policy on its way to the edge: checked by the agent before
 * it connects (a mistake with its line: in the policy file, or in
 * burrow.yml for one written there), carried in HELLO, loaded again by the
 * edge at the handshake (POLICY_INVALID with its errors), confirmed in
 * READY (`policy: true`), and an agent that hears no confirmation (an
 * older server drops the field) leaves rather than serve without it.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeFrames, encodeFrame, jsonPayload } from "../../src/protocol/frames.ts";
import { FrameType, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { spawnAgent } from "../harness/agent.ts";
import { sayHello } from "../harness/raw-agent.ts";
import { burrowCommand } from "../harness/server.ts";
import { withServer } from "../harness/tunnel.ts";
import { policyFile } from "./rig.ts";

const BAD = `on_http_request:
  - name: api
    expressions: ["req.method == 'GET' && req.nope"]
    actions: [{ type: deny }]
`;

/** Runs burrow with `args` (no server needed: it must stop before connecting); exit code and output. */
async function burrow(args: string[], cwd?: string): Promise<{ code: number; out: string }> {
  const home = mkdtempSync(join(tmpdir(), "burrow-home-"));
  try {
    const proc = Bun.spawn([...burrowCommand(), ...args], { cwd, env: { ...process.env, XDG_CONFIG_HOME: home }, stdout: "pipe", stderr: "pipe", timeout: 20_000 });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { code, out: out + err };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

describe("checked by the agent before it connects", () => {
  test("burrow http --policy-file with a mistake: exit 2, the file's line and column, the expression with a caret; nothing connects", async () => {
    using file = policyFile(BAD);
    // a server that is not there: the agent must not get as far as trying it
    const r = await burrow(["http", "3000", "--server", "http://127.0.0.1:9", "--token", "brw_x", "--policy-file", file.path]);
    expect(r.code).toBe(2);
    expect(r.out).toContain(`${file.path}:3:`);
    expect(r.out).toContain("undeclared reference to 'req.nope'");
    expect(r.out).toContain("[CEL_TYPE]");
    expect(r.out).toMatch(/\n\s+req\.method == 'GET' && req\.nope\n\s+\^/);
    expect(r.out).not.toContain("connecting");
  });

  test("--policy-file that is missing, or with --private, or on a udp tunnel: told so", async () => {
    expect((await burrow(["http", "3000", "--token", "brw_x", "--policy-file", "/nonexistent/p.yml"])).out).toContain("--policy-file /nonexistent/p.yml: cannot read it (ENOENT)");
    using file = policyFile("on_http_request: []\n");
    const priv = await burrow(["http", "3000", "--token", "brw_x", "--private", "--name", "web", "--policy-file", file.path]);
    expect(priv.code).toBe(2);
    expect(priv.out).toContain("--policy-file does not go with it");
    const udp = await burrow(["udp", "53", "--token", "brw_x", "--policy-file", file.path]);
    expect(udp.code).toBe(2);
    using http = policyFile("on_http_request: [{actions: [{type: deny}]}]\n");
    const tcp = await burrow(["tcp", "22", "--token", "brw_x", "--policy-file", http.path]);
    expect(tcp.code).toBe(2);
    expect(tcp.out).toContain("runs on_tcp_connect only");
  });

  test("burrow.yml: a policy written in it is checked with burrow.yml's own lines; one in a file beside it, with that file's", async () => {
    const dir = mkdtempSync(join(tmpdir(), "burrow-yml-"));
    try {
      writeFileSync(
        join(dir, "burrow.yml"),
        `tunnels:
  web:
    proto: http
    addr: 3000
    policy:
      on_http_request:
        - actions:
            - type: deny
              config: { status_code: 7 }
  api:
    proto: http
    addr: 3001
    policy: api-policy.yml
`,
      );
      writeFileSync(join(dir, "api-policy.yml"), BAD);
      const inline = await burrow(["config", "check", "--config", join(dir, "burrow.yml")]);
      expect(inline.code).toBe(2);
      expect(inline.out).toContain(`tunnel web: the traffic policy does not load:\n${join(dir, "burrow.yml")}:9:`);
      expect(inline.out).toContain("status_code");
      writeFileSync(join(dir, "burrow.yml"), `tunnels:\n  api:\n    proto: http\n    addr: 3001\n    policy: api-policy.yml\n`);
      const beside = await burrow(["config", "check", "--config", join(dir, "burrow.yml")]);
      expect(beside.code).toBe(2);
      expect(beside.out).toContain(`${join(dir, "api-policy.yml")}:3:`);
      writeFileSync(join(dir, "api-policy.yml"), "on_http_request:\n  - actions: [{ type: deny }]\n");
      const good = await burrow(["config", "check", "--config", join(dir, "burrow.yml")]);
      expect(good.code).toBe(0);
      expect(good.out).toContain("policy (1 rule)");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("loaded by the edge at the handshake", () => {
  const hello = (token: string, tunnels: unknown[], partial = false) => jsonPayload({ version: PROTOCOL_VERSION, token, tunnels, agent: "raw-test", partial });

  test("a policy that does not load refuses the tunnel with POLICY_INVALID and its errors; one that loads is confirmed in READY", async () => {
    await using rig = await withServer();
    const bad = await sayHello({ port: rig.server.edgePort, via: "websocket", payload: hello(rig.token, [{ protocol: "http", policy: BAD }]) });
    expect(bad.refusal?.code).toBe("POLICY_INVALID");
    expect(bad.refusal?.message).toContain("policy:3:");
    expect(bad.refusal?.message).toContain("[CEL_TYPE]");
    const good = await sayHello({ port: rig.server.edgePort, via: "websocket", payload: hello(rig.token, [{ protocol: "http", policy: "on_http_request: [{actions: [{type: deny}]}]" }, { protocol: "http" }]) });
    expect(good.type).toBe("READY");
    expect(good.ready.tunnels[0].policy).toBe(true);
    expect(good.ready.tunnels[1].policy).toBeUndefined();
  });

  test("partial: the tunnel with the bad policy is refused alone; a private tunnel takes none; a tcp tunnel's request-phase rules are refused", async () => {
    await using rig = await withServer();
    const partial = await sayHello({ port: rig.server.edgePort, via: "websocket", payload: hello(rig.token, [{ protocol: "http", policy: BAD }, { protocol: "http" }], true) });
    expect(partial.type).toBe("READY");
    expect(partial.ready.refused).toEqual([expect.objectContaining({ index: 0, code: "POLICY_INVALID" })]);
    const priv = await sayHello({ port: rig.server.edgePort, via: "websocket", payload: hello(rig.token, [{ protocol: "http", private: { name: "web" }, policy: "{}" }]) });
    expect(priv.refusal?.code).toBe("POLICY_INVALID");
    expect(priv.refusal?.message).toContain("private tunnel takes no traffic policy");
    const tcp = await sayHello({ port: rig.server.edgePort, via: "websocket", payload: hello(rig.token, [{ protocol: "tcp", policy: "on_http_request: [{actions: [{type: deny}]}]" }]) });
    expect(tcp.refusal?.code).toBe("POLICY_INVALID");
    expect(tcp.refusal?.message).toContain("runs on_tcp_connect only");
  });
});

test("the server's own caps: --policy-max-rules refuses a policy the agent's defaults took", async () => {
  await using rig = await withServer({ server: { args: ["--policy-max-rules", "1"] } });
  const two = "on_http_request: [{actions: [{type: deny}]}, {actions: [{type: deny}]}]";
  const r = await sayHello({ port: rig.server.edgePort, via: "websocket", payload: jsonPayload({ version: PROTOCOL_VERSION, token: rig.token, tunnels: [{ protocol: "http", policy: two }] }) });
  expect(r.refusal?.code).toBe("POLICY_INVALID");
  expect(r.refusal?.message).toContain("[POLICY_LIMIT]");
});

describe("a server that drops the policy", () => {
  let fake: ReturnType<typeof Bun.serve> | undefined;
  afterEach(() => fake?.stop(true));

  function olderServer(seen: number[]) {
    fake = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: (req, server) => (server.upgrade(req, { data: undefined }) ? undefined : new Response("no", { status: 400 })),
      websocket: {
        message(ws, message) {
          decodeFrames(new Uint8Array(message as Buffer), (f) => {
            seen.push(f.type);
            if (f.type !== FrameType.HELLO) return;
            const tunnel = { id: "t1", protocol: "http", subdomain: "open", url: "http://open.localhost" };
            ws.send(encodeFrame(FrameType.READY, 0, jsonPayload({ session: "s1", username: "old", tunnels: [tunnel] })));
          });
        },
      },
    });
    return `http://127.0.0.1:${fake.port}`;
  }

  test("a tunnel with a policy granted without `policy: true`: the agent leaves (exit 1) with POLICY_UNSUPPORTED and serves nothing", async () => {
    using file = policyFile("on_http_request: [{actions: [{type: deny}]}]\n");
    const seen: number[] = [];
    const { proc, output } = spawnAgent({ kind: "http", target: 3000, server: olderServer(seen), token: "brw_test", args: ["--log", "text", "--no-inspect", "--policy-file", file.path] });
    try {
      const code = await Promise.race([proc.exited, Bun.sleep(10_000).then(() => "timeout")]);
      expect(code).toBe(1);
      await output.closed();
      expect(output.text()).toContain("POLICY_UNSUPPORTED: the server does not run traffic policies");
      expect(output.text()).not.toContain("Forwarding");
      expect(seen).toContain(FrameType.GOAWAY);
    } finally {
      proc.kill();
    }
  });
});
