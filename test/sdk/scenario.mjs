// Run by test/sdk/package.test.ts with `node` and with `bun`, inside a temp
// project where the packed burrow-agent is installed: each scenario prints
// one JSON line of what it saw.
import { request } from "node:http";
import { connect } from "node:net";
import { createSocket } from "node:dgram";
import { BurrowError, connect as openSession, forward, reach } from "burrow-agent";

const { server, token, edgePort, httpPort, echoPort, udpEchoPort, scenario, proxy, noProxyToken, friendToken, owner } = JSON.parse(process.env.SCENARIO);

/** GET `path` from the edge for the tunnel's public URL's host. */
function visit(url, path, method = "GET", body, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port: edgePort, path, method, headers: { host: new URL(url).host, ...headers } }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode, body }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

function echo(port, text) {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1", () => s.write(text));
    let got = "";
    s.on("data", (d) => {
      got += d;
      if (got.length >= text.length) (s.destroy(), resolve(got));
    });
    s.on("error", reject);
  });
}

/** One datagram to 127.0.0.1:`port`, and the first one back (5 tries, 1 s each: UDP may drop one). */
async function udpEcho(port, text) {
  const socket = createSocket("udp4");
  try {
    for (let i = 0; i < 5; i++) {
      const got = new Promise((resolve) => {
        const t = setTimeout(() => resolve(undefined), 1000);
        socket.once("message", (m) => (clearTimeout(t), resolve(m.toString())));
      });
      socket.send(text, port, "127.0.0.1");
      const answer = await got;
      if (answer !== undefined) return answer;
    }
    return "no answer";
  } finally {
    socket.close();
  }
}

const runtime = typeof Bun === "undefined" ? `node ${process.version}` : "bun";
const out = { runtime };
try {
  if (scenario === "http") {
    const tunnel = await forward({ port: httpPort, subdomain: `sdk-${process.env.NAME}`, server, token });
    const seen = [];
    tunnel.on("request", (r) => seen.push(r));
    out.url = tunnel.url;
    out.answer = await visit(tunnel.url, "/hello?from=sdk");
    await new Promise((r) => setTimeout(r, 100));
    out.requests = seen.map((r) => ({ method: r.method, path: r.path, status: r.status, timed: typeof r.duration === "number" }));
    await tunnel.close();
    // the name is free again at once: the same subdomain opens again straight away
    const again = await forward({ port: httpPort, subdomain: `sdk-${process.env.NAME}`, server, token });
    out.again = again.url === tunnel.url;
    await again.close();
  } else if (scenario === "handler") {
    const tunnel = await forward({
      server,
      token,
      subdomain: `handler-${process.env.NAME}`,
      async handler(req) {
        const url = new URL(req.url);
        if (url.pathname === "/stream") {
          // a body that comes in pieces, with no length: sent chunked
          const parts = ["one ", "two ", "three"];
          return new Response(new ReadableStream({ async pull(c) { const p = parts.shift(); if (p === undefined) c.close(); else { await new Promise((r) => setTimeout(r, 20)); c.enqueue(new TextEncoder().encode(p)); } } }));
        }
        if (url.pathname === "/throw") throw new Error("a bug in the handler");
        return Response.json({ method: req.method, path: url.pathname + url.search, body: await req.text(), header: req.headers.get("x-test") }, { status: 201 });
      },
    });
    out.post = await visit(tunnel.url, "/h?x=1", "POST", "ping");
    out.stream = await visit(tunnel.url, "/stream");
    out.thrown = (await visit(tunnel.url, "/throw")).status;
    out.upgrade = (await visit(tunnel.url, "/ws", "GET", undefined, { connection: "Upgrade", upgrade: "websocket", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", "sec-websocket-version": "13" })).status;
    await tunnel.close();
  } else if (scenario === "session") {
    // three tunnels asked for in one turn: one handshake, one connection
    const session = openSession({ server, token });
    const [a, b, t] = await Promise.all([
      session.forward({ port: httpPort, subdomain: `sa-${process.env.NAME}` }),
      session.forward({ handler: () => new Response("from b"), subdomain: `sb-${process.env.NAME}` }),
      session.forward({ protocol: "tcp", port: echoPort }),
    ]);
    out.first = [(await visit(a.url, "/a")).body, (await visit(b.url, "/b")).body, await echo(t.port, "t")];
    // one more, later: the session starts again with four, the others keep their names
    const d = await session.forward({ handler: () => new Response("from d"), subdomain: `sd-${process.env.NAME}` });
    out.second = [(await visit(a.url, "/a")).body, (await visit(d.url, "/d")).body, await echo(t.port, "t2")];
    // one refused among them: only it rejects
    try {
      await session.forward({ port: httpPort, subdomain: `sa-${process.env.NAME}` });
      out.duplicate = "granted";
    } catch (err) {
      out.duplicate = err.code;
    }
    // closing one frees its name at once, the others go on
    await b.close();
    const taken = await forward({ handler: () => new Response("b elsewhere"), subdomain: `sb-${process.env.NAME}`, server, token });
    out.third = [(await visit(a.url, "/a")).body, (await visit(taken.url, "/")).body];
    await taken.close();
    await session.close();
    out.after = (await visit(a.url, "/")).status;
  } else if (scenario === "tcp") {
    const tunnel = await forward({ protocol: "tcp", port: echoPort, server, token });
    out.port = tunnel.port;
    out.echo = await echo(tunnel.port, "bytes through a tcp tunnel");
    await tunnel.close();
  } else if (scenario === "refused") {
    const held = await forward({ port: httpPort, subdomain: `held-${process.env.NAME}`, server, token });
    try {
      await forward({ port: httpPort, subdomain: `held-${process.env.NAME}`, server, token });
      out.refused = false;
    } catch (err) {
      out.refused = { isBurrowError: err instanceof BurrowError, code: err.code, message: err.message };
    }
    await held.close();
    try {
      await forward({ port: httpPort, server, token: "not-a-token" });
    } catch (err) {
      out.badToken = err.code;
    }
    // a mistake in an option is the caller's: a TypeError naming it, before anything connects
    for (const bad of [{ basicAuth: ["no-colon"] }, { port: 70000 }, { protocol: "tcp", basicAuth: ["u:secretsecret"] }, { allowCidr: ["not-a-cidr"] }]) {
      try {
        await forward({ port: httpPort, server, token, ...bad });
        (out.bad ??= []).push("opened");
      } catch (err) {
        (out.bad ??= []).push(`${err.name}: ${err.message.split(":")[0]}`);
      }
    }
  } else if (scenario === "access") {
    // the CLI's access rules, as options: basic auth and a header set on requests
    const tunnel = await forward({ port: httpPort, server, token, basicAuth: ["ann:correct-horse"], requestHeaderAdd: ["X-From: sdk"] });
    out.without = (await visit(tunnel.url, "/private")).status;
    out.with = await visit(tunnel.url, "/private", "GET", undefined, { authorization: `Basic ${Buffer.from("ann:correct-horse").toString("base64")}` });
    await tunnel.close();
  } else if (scenario === "inspect") {
    // the inspector, off unless asked: on, it listens on a free loopback port and captures the tunnel's requests
    const plain = await forward({ port: httpPort, server, token });
    out.plain = plain.inspector ?? null;
    await plain.close();
    const tunnel = await forward({ port: httpPort, server, token, inspect: true });
    out.inspector = tunnel.inspector;
    await visit(tunnel.url, "/seen-by-the-inspector?x=1");
    await new Promise((r) => setTimeout(r, 200));
    const list = await (await fetch(`${tunnel.inspector}/api/requests`)).json();
    out.captured = (list.requests ?? list).map((r) => `${r.method} ${r.path} ${r.status ?? r.response?.status}`);
    out.page = (await fetch(`${tunnel.inspector}/`)).headers.get("content-type");
    await tunnel.close();
    out.after = await fetch(`${tunnel.inspector}/api/requests`).then(() => "still up", () => "closed");
  } else if (scenario === "proxy") {
    // the connection to the server through an HTTP proxy (CONNECT): a tunnel, and a session's tunnel
    const tunnel = await forward({ port: httpPort, subdomain: `proxied-${process.env.NAME}`, server, token, proxy });
    out.answer = await visit(tunnel.url, "/through-the-proxy");
    await tunnel.close();
    const session = openSession({ server, token, proxy });
    const inSession = await session.forward({ port: httpPort });
    out.session = (await visit(inSession.url, "/session-through-the-proxy")).body;
    try {
      await session.forward({ port: httpPort, proxy });
      out.sessionProxy = "opened";
    } catch (err) {
      out.sessionProxy = `${err.name}: ${err.message}`;
    }
    await session.close();
    // a user who may not use a proxy: refused by the server, reached through it
    try {
      await forward({ port: httpPort, server, token: noProxyToken, proxy });
      out.denied = "opened";
    } catch (err) {
      out.denied = err.code;
    }
    for (const bad of ["ftp://proxy:21", "not a url", 3128]) {
      try {
        await forward({ port: httpPort, server, token, proxy: bad });
        (out.bad ??= []).push("opened");
      } catch (err) {
        (out.bad ??= []).push(`${err.name}: ${err.message.split(":")[0]}`);
      }
    }
  } else if (scenario === "private") {
    // a private tcp and http tunnel, shared with a friend who reaches them through local ports
    const name = process.env.NAME;
    const db = await forward({ protocol: "tcp", port: echoPort, private: true, name: `db-${name}`, share: ["sdk-friend"], server, token });
    const web = await forward({ port: httpPort, private: true, name: `web-${name}`, share: ["sdk-friend"], server, token });
    out.publicPort = db.port ?? null;
    const toDb = await reach(`${owner}/db-${name}`, { server, token: friendToken, port: 0 });
    out.db = { protocol: toDb.protocol, host: toDb.host, echo: await echo(toDb.port, "bytes to a private tunnel") };
    // a local port that is taken here: refused, with what it could not do
    out.taken = await reach(`${owner}/db-${name}`, { server, token: friendToken, port: echoPort }).then(
      (r) => (r.close(), "listened"),
      (err) => err.code,
    );
    const toWeb = await reach(`${owner}/web-${name}`, { server, token: friendToken, port: 0 });
    out.web = { protocol: toWeb.protocol, url: toWeb.url?.replace(/:\d+$/, ":PORT"), body: await (await fetch(`${toWeb.url}/who`, { headers: { "x-burrow-user": "admin" } })).text() };
    const dns = await forward({ protocol: "udp", port: udpEchoPort, private: true, name: `udp-${name}`, share: ["sdk-friend"], server, token });
    const toDns = await reach(`${owner}/udp-${name}`, { server, token: friendToken, port: 0 });
    out.udp = { protocol: toDns.protocol, echo: await udpEcho(toDns.port, "a datagram to a private tunnel") };
    await toDns.close();
    await dns.close();
    // someone it is not shared with: the same answer as for a tunnel that does not exist
    for (const [who, target] of [["stranger", `${owner}/db-${name}`], ["nobody's", `${owner}/no-such-${name}`]]) {
      try {
        await reach(target, { server, token: noProxyToken, port: 0 });
        (out.refused ??= {})[who] = "reached";
      } catch (err) {
        (out.refused ??= {})[who] = err.code;
      }
    }
    const closed = new Promise((resolve) => toDb.on("closed", resolve));
    await toDb.close();
    out.closedEvent = await closed;
    out.portAfterClose = await echo(toDb.port, "x").then(() => "open", () => "closed");
    await toWeb.close();
    await db.close();
    await web.close();
    for (const bad of [() => reach("no-slash", { server, token }), () => forward({ port: httpPort, private: true, server, token }), () => forward({ port: httpPort, private: true, name: "x", subdomain: "y", server, token }), () => forward({ port: httpPort, name: "x", server, token })]) {
      try {
        await bad();
        (out.bad ??= []).push("opened");
      } catch (err) {
        (out.bad ??= []).push(`${err.name}: ${err.message.split(":")[0]}`);
      }
    }
  } else if (scenario === "abort") {
    const controller = new AbortController();
    const tunnel = await forward({ port: httpPort, subdomain: `abort-${process.env.NAME}`, server, token, signal: controller.signal });
    const closed = new Promise((resolve) => tunnel.on("closed", resolve));
    controller.abort();
    out.closed = await closed;
    out.after = (await visit(tunnel.url, "/")).status;
  }
} catch (err) {
  out.error = `${err?.name}: ${err?.message} ${err?.code ?? ""}`;
}
console.log(JSON.stringify(out));
process.exit(0);
