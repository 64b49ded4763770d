/** /api/hostnames: users' own hostnames, and their verification by a TXT record. */
import type { Route } from "./context.ts";
import { json, parseBody, parseId, parseQuery } from "../api/http.ts";
import { hostnameJson } from "../api/json.ts";
import { EntryList, HostnameJson, StatusBody } from "../api/responses.ts";
import { CreateHostnameBody, HostnamesQuery } from "./schemas.ts";

export const hostnameRoutes: Route[] = [
  {
    path: "/api/hostnames",
    methods: {
      async GET(req, { core }) {
        const query = parseQuery(req, HostnamesQuery);
        return json((await core.hostnames.list(query.user_id)).map(hostnameJson));
      },
      async POST(req, { core, audit }) {
        const body = await parseBody(req, CreateHostnameBody);
        audit.details = { hostname: body.hostname.slice(0, 300), user_id: body.user_id, verified: body.verified ?? false };
        const made = await core.hostnames.create(body.hostname, body.user_id, body.verified ?? false);
        audit.target = `hostname:${made.id}`;
        audit.details = { hostname: made.hostname, user_id: made.userId, verified: made.verified };
        return json(hostnameJson(made), 201);
      },
    },
    audit: { POST: "hostname.create" },
    docs: {
      GET: {
        summary: "Custom hostnames, by id (?user_id= for one user's)",
        query: HostnamesQuery,
        responses: { 200: { description: "Every hostname, or one user's", schema: EntryList(HostnameJson) } },
      },
      POST: {
        summary: "Register a hostname for a user; verified: true takes the admin's word for it",
        body: CreateHostnameBody,
        responses: {
          201: { description: "Registered, with the TXT record that verifies it", schema: HostnameJson },
          400: { description: "Not a hostname, or one of this server's own domain" },
          404: { description: "No such user" },
          409: { description: "Registered already (HOSTNAME_TAKEN), or overlaps another user's hostname (HOSTNAME_OVERLAP): the message names it" },
        },
      },
    },
  },
  {
    path: "/api/hostnames/:id/verify",
    methods: {
      async POST(req, { core, audit }) {
        const id = parseId(req.params.id);
        audit.target = `hostname:${id}`;
        const h = await core.hostnames.verify(id);
        audit.details = { hostname: h.hostname, user_id: h.userId };
        return json(hostnameJson(h));
      },
    },
    audit: { POST: "hostname.verify" },
    docs: {
      POST: {
        summary: "Look the hostname's TXT record up: verified when it holds the value",
        responses: {
          200: { description: "Verified (now, or already)", schema: HostnameJson },
          404: { description: "No such hostname" },
          409: { description: "Not verified (HOSTNAME_NOT_VERIFIED): the message says what the lookup found" },
        },
      },
    },
  },
  {
    path: "/api/hostnames/:id",
    methods: {
      async DELETE(req, { core, audit }) {
        const id = parseId(req.params.id);
        audit.target = `hostname:${id}`;
        const gone = await core.hostnames.remove(id);
        audit.details = { hostname: gone.hostname, user_id: gone.userId };
        return json({ status: "removed" });
      },
    },
    audit: { DELETE: "hostname.delete" },
    docs: {
      DELETE: { summary: "Delete a hostname", responses: { 200: { description: "Deleted", schema: StatusBody("removed") }, 404: { description: "No such hostname" } } },
    },
  },
];
