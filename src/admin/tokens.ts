/** /api/users/:id/tokens and /api/tokens/:id. */
import type { Route } from "./context.ts";
import { json, parseBody, parseId } from "../api/http.ts";
import { tokenJson } from "../api/json.ts";
import { EntryList, NewTokenJson, StatusBody, TokenJson } from "../api/responses.ts";
import { CreateTokenBody } from "./schemas.ts";

export const tokenRoutes: Route[] = [
  {
    path: "/api/users/:id/tokens",
    methods: {
      async GET(req, { core }) {
        const user = await core.users.get(parseId(req.params.id));
        return json((await core.tokens.listForUser(user.id)).map(tokenJson));
      },
      async POST(req, { core, audit }) {
        const user = await core.users.get(parseId(req.params.id));
        audit.details = { user_id: user.id, username: user.username };
        const body = await parseBody(req, CreateTokenBody);
        const { secret, row } = await core.tokens.generate(user.id, body.device_name);
        audit.target = `token:${row.id}`;
        audit.details = { ...audit.details, device_name: row.deviceName };
        return json(
          {
            token: secret,
            token_id: row.id,
            message: "Store this token now: it is shown only once and cannot be retrieved later.",
          },
          201,
        );
      },
    },
    audit: { POST: "token.create" },
    docs: {
      GET: { summary: "A user's device tokens, by id", responses: { 200: { description: "The tokens (never their secrets)", schema: EntryList(TokenJson) } } },
      POST: {
        summary: "Generate a device token; its secret is in this answer only",
        body: CreateTokenBody,
        responses: { 201: { description: "The token, with its secret", schema: NewTokenJson } },
      },
    },
  },
  {
    path: "/api/tokens/:id",
    methods: {
      async DELETE(req, { core, audit }) {
        const id = parseId(req.params.id);
        audit.target = `token:${id}`;
        await core.tokens.revoke(id);
        return json({ status: "revoked" });
      },
    },
    audit: { DELETE: "token.revoke" },
    docs: {
      DELETE: {
        summary: "Revoke a device token (idempotent): its tunnels close now",
        responses: { 200: { description: "Revoked", schema: StatusBody("revoked") } },
      },
    },
  },
];
