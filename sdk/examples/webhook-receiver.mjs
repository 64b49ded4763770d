// A webhook receiver on a public URL, with no local port: each POST is
// printed as one JSON line and answered 200. Run it with BURROW_SERVER and
// BURROW_TOKEN set (or after `burrow login`), give the printed address to
// the service that sends the webhooks, stop it with Ctrl-C.
import { forward } from "burrow-agent";

const tunnel = await forward({
  subdomain: process.env.WEBHOOK_SUBDOMAIN, // undefined: a random name
  async handler(request) {
    if (request.method !== "POST") return new Response("POST webhooks here\n", { status: 405, headers: { allow: "POST" } });
    const event = {
      at: new Date().toISOString(),
      path: new URL(request.url).pathname,
      type: request.headers.get("content-type"),
      body: await request.text(),
    };
    console.log(JSON.stringify(event));
    return Response.json({ received: true });
  },
});
console.log(`receiving webhooks at ${tunnel.url}`);
tunnel.on("reconnecting", ({ why }) => console.error(`connection lost (${why}); trying again`));

process.once("SIGINT", async () => {
  await tunnel.close();
  process.exit(0);
});
