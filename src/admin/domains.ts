/** /api/domains and /api/domains/:id: reserved subdomains. */
import type { Route } from "./context.ts";
import { json, parseBody, parseId } from "../api/http.ts";
import { domainJson } from "../api/json.ts";
import { DomainJson, EntryList, StatusBody } from "../api/responses.ts";
import { ReserveBody } from "./schemas.ts";

export const domainRoutes: Route[] = [
  {
    path: "/api/domains",
    methods: {
      GET: async (_req, { core }) => json((await core.domains.list()).map(domainJson)),
      async POST(req, { core, audit }) {
        const body = await parseBody(req, ReserveBody);
        audit.details = { subdomain: body.subdomain, user_id: body.user_id };
        const reserved = await core.domains.reserve(body.subdomain, body.user_id);
        audit.target = `domain:${reserved.id}`;
        return json(domainJson(reserved), 201);
      },
    },
    audit: { POST: "domain.reserve" },
    docs: {
      GET: { summary: "Reserved subdomains, by id", responses: { 200: { description: "Every reserved subdomain", schema: EntryList(DomainJson) } } },
      POST: {
        summary: "Reserve a subdomain for a user",
        body: ReserveBody,
        responses: { 201: { description: "Reserved", schema: DomainJson }, 404: { description: "No such user" }, 409: { description: "Already reserved" } },
      },
    },
  },
  {
    path: "/api/domains/:id",
    methods: {
      async DELETE(req, { core, audit }) {
        const id = parseId(req.params.id);
        audit.target = `domain:${id}`;
        const gone = await core.domains.release(id);
        audit.details = { subdomain: gone.subdomain, user_id: gone.userId };
        return json({ status: "removed" });
      },
    },
    audit: { DELETE: "domain.release" },
    docs: {
      DELETE: { summary: "Release a reserved subdomain", responses: { 200: { description: "Released", schema: StatusBody("removed") } } },
    },
  },
];
