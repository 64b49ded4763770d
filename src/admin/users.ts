/** /api/users and /api/users/:id. */
import type { Route } from "./context.ts";
import { json, parseBody, parseId } from "../api/http.ts";
import { userJson } from "../api/json.ts";
import { EntryList, StatusBody, UserDetailsJson, UserJson } from "../api/responses.ts";
import { CreateUserBody, definedOnly, UpdateUserBody, userSettings } from "./schemas.ts";

type UserFields = ReturnType<typeof userJson>;
/** Fields that are not settings: they never count as changed. */
const NOT_SETTINGS = new Set(["id", "created_at", "updated_at"]);

/** The settings of a new user, for its audit entry. */
const settingsOf = (u: UserFields) => Object.fromEntries(Object.entries(u).filter(([k]) => !NOT_SETTINGS.has(k)));

/** What an update changed, as {field: {from, to}}, for its audit entry. */
function changesOf(before: UserFields, after: UserFields): Record<string, { from: unknown; to: unknown }> {
  const changed: Record<string, { from: unknown; to: unknown }> = {};
  for (const [k, to] of Object.entries(after)) {
    const from = before[k as keyof UserFields];
    // lists (allow_cidrs) are new arrays each time: equal when their JSON is
    if (!NOT_SETTINGS.has(k) && JSON.stringify(from) !== JSON.stringify(to)) changed[k] = { from, to };
  }
  return changed;
}

export const userRoutes: Route[] = [
  {
    path: "/api/users",
    methods: {
      GET: async (_req, { core }) => json((await core.users.list()).map(userJson)),
      async POST(req, { core, audit }) {
        const body = await parseBody(req, CreateUserBody);
        const { username, password, ...settings } = userSettings(body);
        const user = await core.users.create({ username: username!, password: password!, ...definedOnly(settings) });
        audit.target = `user:${user.id}`;
        audit.details = { fields: settingsOf(userJson(user)) }; // the password is not a field here
        return json(userJson(user), 201, { Location: `/api/users/${user.id}` });
      },
    },
    audit: { POST: "user.create" },
    docs: {
      GET: { summary: "List users, by id", responses: { 200: { description: "Every user", schema: EntryList(UserJson) } } },
      POST: {
        summary: "Create a user",
        body: CreateUserBody,
        responses: { 201: { description: "The new user (Location: its address)", schema: UserJson }, 409: { description: "The username is taken (case-insensitive)" } },
      },
    },
  },
  {
    path: "/api/users/:id",
    methods: {
      async GET(req, { core }) {
        const user = await core.users.get(parseId(req.params.id));
        return json({
          user: userJson(user),
          traffic_used: await core.traffic.usedInPeriod(user),
          active_tokens: (await core.tokens.listForUser(user.id)).filter((t) => t.enabled).length,
        });
      },
      async PUT(req, { core, audit, sessionKey }) {
        const id = parseId(req.params.id);
        audit.target = `user:${id}`;
        const before = await core.users.get(id); // 404 before 400: a body for a user that does not exist is moot
        const body = await parseBody(req, UpdateUserBody);
        audit.details = { requested: Object.keys(definedOnly(body)) }; // the names only: what a failed update tried
        // a new password ends the user's sessions but the one making the change (an admin changing their own)
        const after = await core.users.update(id, definedOnly(userSettings(body)), { keepSession: sessionKey });
        audit.details = { changes: changesOf(userJson(before), userJson(after)), ...(body.password !== undefined ? { password_changed: true } : {}) };
        return json(userJson(after));
      },
      async DELETE(req, { core, audit }) {
        const id = parseId(req.params.id);
        audit.target = `user:${id}`;
        audit.details = { username: (await core.users.get(id)).username };
        await core.users.delete(id);
        return json({ status: "deleted" });
      },
    },
    audit: { PUT: "user.update", DELETE: "user.delete" },
    docs: {
      GET: { summary: "A user, with traffic used this period and active tokens", responses: { 200: { description: "The user's details", schema: UserDetailsJson } } },
      PUT: {
        summary: "Change a user: only the fields sent change",
        description:
          "A new `password` ends every session of the user (admin API and portal, on every node) but the one making the request; a new `role` ends the user's admin sessions. Device tokens and API keys stay.",
        body: UpdateUserBody,
        responses: { 200: { description: "The updated user", schema: UserJson }, 409: { description: "The username is taken, or the change would leave no enabled admin" } },
      },
      DELETE: {
        summary: "Delete a user with its tokens, reserved subdomains, sessions, API keys and traffic",
        responses: { 200: { description: "Deleted", schema: StatusBody("deleted") }, 409: { description: "The last enabled admin" } },
      },
    },
  },
];
