/**
 * /api/policies: the operator's traffic policies (docs/policy.md), each
 * covering every tunnel, a user's, or those reached by a hostname or a
 * wildcard. A document is loaded before it is stored, under the server's
 * caps, as the edge will load it: one that does not load is refused (400)
 * with its errors and their lines. Live tunnels take a change within
 * seconds, without reconnecting (edge/traffic-policy/edge-policies.ts).
 */
import { badRequest } from "../core/errors.ts";
import { json, parseBody, parseId } from "../api/http.ts";
import { policyJson } from "../api/json.ts";
import { EntryList, PolicyJson, StatusBody } from "../api/responses.ts";
import { formatPolicyError, loadPolicy, type PolicyLimits } from "../policy/index.ts";
import type { Route } from "./context.ts";
import { CreatePolicyBody, UpdatePolicyBody } from "./schemas.ts";

/** The errors a refusal lists at most. */
const ERRORS_SAID = 20;

/** The document, loaded and thrown away: its errors as a 400 when it does not load. */
function checked(document: string, limits: Partial<PolicyLimits>, geoip: boolean): string {
  const loaded = loadPolicy(document, { source: "policy", limits, geoip });
  if (!Array.isArray(loaded)) return document;
  const said = loaded.slice(0, ERRORS_SAID).map((e) => formatPolicyError(e, "policy"));
  if (loaded.length > ERRORS_SAID) said.push(`(and ${loaded.length - ERRORS_SAID} more)`);
  throw badRequest(`policy: does not load:\n${said.join("\n")}`);
}

const ERRORS = {
  400: { description: "A field is wrong, or the document does not load: the message lists its errors with their lines and codes, as `burrow policy check` prints them" },
  404: { description: "No such policy, or (scope user) no such user" },
  409: { description: "Another policy has this name (POLICY_NAME_TAKEN)" },
};

/**
 * `limits`: the server's caps on a policy (its --policy-max-* flags and the like: config/server.ts);
 * `geoip`: the server has a GeoIP database (--geoip-db), without which a policy that reads conn.geo.* is refused.
 */
export function policyRoutes(limits: Partial<PolicyLimits> = {}, geoip = false): Route[] {
  return [
    {
      path: "/api/policies",
      methods: {
        GET: async (_req, { core }) => json((await core.trafficPolicies.list()).map(policyJson)),
        async POST(req, { core, audit }) {
          const body = await parseBody(req, CreatePolicyBody);
          audit.details = { name: body.name, scope: body.scope, ...(body.user_id !== undefined ? { user_id: body.user_id } : {}), ...(body.hostname !== undefined ? { hostname: body.hostname.slice(0, 300) } : {}) };
          const made = await core.trafficPolicies.create({ name: body.name, scope: body.scope, userId: body.user_id, hostname: body.hostname, document: checked(body.policy, limits, geoip) });
          audit.target = `policy:${made.id}`;
          return json(policyJson(made), 201);
        },
      },
      audit: { POST: "policy.create" },
      docs: {
        GET: { summary: "The operator's traffic policies, by id (the order those of one scope run in)", responses: { 200: { description: "Every policy", schema: EntryList(PolicyJson) } } },
        POST: {
          summary: "Make a traffic policy that runs before the tunnels' own on the tunnels its scope covers: server (every tunnel), user (user_id) or hostname (a name, or *.wildcard)",
          body: CreatePolicyBody,
          responses: { 201: { description: "Made; live tunnels it covers run it within seconds", schema: PolicyJson }, ...ERRORS },
        },
      },
    },
    {
      path: "/api/policies/:id",
      methods: {
        GET: async (req, { core }) => json(policyJson(await core.trafficPolicies.get(parseId(req.params.id)))),
        async PUT(req, { core, audit }) {
          const id = parseId(req.params.id);
          audit.target = `policy:${id}`;
          const body = await parseBody(req, UpdatePolicyBody);
          audit.details = { fields: Object.keys(body).filter((k) => (body as Record<string, unknown>)[k] !== undefined) };
          const changed = await core.trafficPolicies.update(id, {
            name: body.name,
            scope: body.scope,
            userId: body.user_id,
            hostname: body.hostname,
            document: body.policy === undefined ? undefined : checked(body.policy, limits, geoip),
          });
          return json(policyJson(changed));
        },
        async DELETE(req, { core, audit }) {
          const id = parseId(req.params.id);
          audit.target = `policy:${id}`;
          const gone = await core.trafficPolicies.remove(id);
          audit.details = { name: gone.name, scope: gone.scope };
          return json({ status: "deleted" });
        },
      },
      audit: { PUT: "policy.update", DELETE: "policy.delete" },
      docs: {
        GET: { summary: "A traffic policy", responses: { 200: { description: "The policy", schema: PolicyJson }, 404: ERRORS[404] } },
        PUT: {
          summary: "Change a policy: only the fields given change (a new scope takes its user_id or hostname); live tunnels take it within seconds",
          body: UpdatePolicyBody,
          responses: { 200: { description: "Changed", schema: PolicyJson }, ...ERRORS },
        },
        DELETE: { summary: "Delete a policy; live tunnels stop running it within seconds", responses: { 200: { description: "Deleted", schema: StatusBody("deleted") }, 404: ERRORS[404] } },
      },
    },
  ];
}
