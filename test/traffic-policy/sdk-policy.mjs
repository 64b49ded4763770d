// Run by sdk-policy.test.ts under node, in a temp project where the packed
// burrow-agent is installed: tunnels opened with forward({ policy }), each
// visited through the edge; prints one JSON line of what it saw.
import { request } from "node:http";
import { forward } from "burrow-agent";

const { server, token, edgePort, httpPort } = JSON.parse(process.env.SCENARIO);

function visit(url, path, method = "GET") {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port: edgePort, path, method, headers: { host: new URL(url).host } }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode, body, tag: res.headers["x-policy"] ?? null }));
    });
    req.on("error", reject);
    req.end();
  });
}

const out = {};
try {
  // an object, sent as JSON
  const asObject = await forward({
    port: httpPort,
    server,
    token,
    policy: {
      on_http_request: [{ name: "no deletes", expressions: ["req.method == 'DELETE'"], actions: [{ type: "deny", config: { status_code: 405 } }] }],
      on_http_response: [{ actions: [{ type: "add-headers", config: { headers: { "x-policy": "object" } } }] }],
    },
  });
  out.objectDelete = await visit(asObject.url, "/x", "DELETE");
  out.objectGet = await visit(asObject.url, "/x");
  await asObject.close();
  // the YAML text, as a policy file holds it
  const asText = await forward({
    port: httpPort,
    server,
    token,
    policy: "on_http_request:\n  - expressions: [\"req.url.path == '/teapot'\"]\n    actions: [{ type: custom-response, config: { status_code: 418, body: short and stout } }]\n",
  });
  out.textTeapot = await visit(asText.url, "/teapot");
  out.textOther = await visit(asText.url, "/other");
  await asText.close();
  // one the edge cannot load: forward() rejects with the code and the errors
  try {
    await forward({ port: httpPort, server, token, policy: "on_http_request:\n  - actions: [{ type: forward-internal }]\n" });
    out.bad = "opened";
  } catch (err) {
    out.bad = { code: err.code, message: err.message };
  }
} catch (err) {
  out.error = String(err?.stack ?? err);
}
console.log(JSON.stringify(out));
process.exit(0);
