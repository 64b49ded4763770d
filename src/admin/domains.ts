/** /api/domains and /api/domains/:id: reserved subdomains. */
import type { Route } from "./context.ts";
import { json, parseBody, parseId } from "./http.ts";
import { domainJson } from "./json.ts";
import { ReserveBody } from "./schemas.ts";

export const domainRoutes: Route[] = [
  {
    path: "/api/domains",
    methods: {
      GET: (_req, { core }) => json(core.domains.list().map(domainJson)),
      async POST(req, { core }) {
        const body = await parseBody(req, ReserveBody);
        return json(domainJson(core.domains.reserve(body.subdomain, body.user_id)), 201);
      },
    },
  },
  {
    path: "/api/domains/:id",
    methods: {
      DELETE(req, { core }) {
        core.domains.release(parseId(req.params.id));
        return json({ status: "removed" });
      },
    },
  },
];
