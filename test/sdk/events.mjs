// Run by test/sdk/lifecycle.test.ts under Node.js in a temp project with the
// packed burrow-agent: one tunnel, each of its events printed as a JSON line.
import { forward } from "burrow-agent";

const { server, token, port, subdomain } = JSON.parse(process.env.SCENARIO);
const say = (o) => console.log(JSON.stringify(o));
const tunnel = await forward({ server, token, port, subdomain });
say({ event: "live", url: tunnel.url });
tunnel.on("reconnecting", (e) => say({ event: "reconnecting", why: e.why }));
tunnel.on("online", () => say({ event: "online", url: tunnel.url }));
tunnel.on("closed", (e) => {
  say({ event: "closed", ...e });
  process.exit(0);
});
