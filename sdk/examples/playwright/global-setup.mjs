// Playwright's global setup: the app under test runs locally, and a burrow
// tunnel gives it a public URL for the whole run (what a third-party
// redirect, an OAuth callback or a webhook needs). The tests read it from
// BASE_URL; the teardown Playwright calls at the end closes both.
import { createServer } from "node:http";
import { forward } from "burrow-agent";

export default async function globalSetup() {
  const app = createServer((req, res) => {
    res.setHeader("content-type", "text/html; charset=utf-8");
    res.end(`<!doctype html><title>app under test</title><h1>hello through burrow</h1><p id="path">${req.url}</p>`);
  });
  await new Promise((resolve) => app.listen(0, "127.0.0.1", resolve));
  // skipWarning: the browser goes straight to the app (the account must allow it: skip_warning)
  const tunnel = await forward({ port: app.address().port, skipWarning: true });
  process.env.BASE_URL = tunnel.url;
  return async () => {
    await tunnel.close();
    app.close();
  };
}
