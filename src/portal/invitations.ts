/**
 * Opening an invitation on the portal: what it offers, then the invitee's
 * username and password, which make the user (with the invitation's
 * settings) and sign them in. The link's secret travels in the page's
 * address after `#` (never sent by the browser on its own, so never in a
 * proxy's log) and from there in these requests' bodies.
 */
import * as v from "valibot";
import { json, parseBody } from "../api/http.ts";
import { ErrorBody } from "../api/responses.ts";
import type { Invitation } from "../core/invitations.ts";
import * as f from "../validate/fields.ts";

const { required } = f;
import type { PortalRoute } from "./context.ts";
import { sessionCookie } from "./cookie.ts";
import { SignedInJson } from "./auth.ts";

const link = required(v.pipe(v.string("must be a string"), v.maxLength(200, "must be at most 200 characters")));

export const InvitationBody = v.object({ invitation: link });

export const AcceptBody = v.object({ invitation: link, username: required(f.username), password: required(f.password) });

const count = v.pipe(v.number(), v.integer(), v.minValue(0));

export const OfferJson = v.strictObject({
  note: v.string(),
  max_tunnels: count,
  allowed_protocols: v.string(),
  traffic_limit: count,
  traffic_period: v.picklist(["daily", "monthly", "quarterly"]),
  max_devices: count,
  expires_at: v.string(),
});

const offerJson = (i: Invitation) => ({
  note: i.note,
  max_tunnels: i.settings.maxTunnels,
  allowed_protocols: i.settings.allowedProtocols,
  traffic_limit: i.settings.trafficLimit,
  traffic_period: i.settings.trafficPeriod,
  max_devices: i.settings.maxDevices,
  expires_at: i.expiresAt,
});

export const invitationRoutes: PortalRoute[] = [
  {
    path: "/_burrow/api/invitation",
    public: true,
    methods: {
      async POST(req, { core, address }) {
        const body = await parseBody(req, InvitationBody);
        return json(offerJson(await core.invitations.describe(body.invitation, address)));
      },
    },
    docs: {
      POST: {
        summary: "What an invitation offers (the limits its user gets), before choosing a username",
        body: InvitationBody,
        security: [],
        responses: {
          200: { description: "The offer", schema: OfferJson },
          410: { description: "INVITATION_INVALID: unknown, used, expired or withdrawn", schema: ErrorBody },
          429: { description: "Too many wrong links from this address (Retry-After)", schema: ErrorBody },
        },
      },
    },
  },
  {
    path: "/_burrow/api/invitation/accept",
    public: true,
    methods: {
      async POST(req, { core, address, audit, secure }) {
        const body = await parseBody(req, AcceptBody);
        audit.actor = { username: body.username };
        const { user, invitation } = await core.invitations.accept(body.invitation, address, { username: body.username, password: body.password });
        audit.actor = { userId: user.id, username: user.username };
        audit.target = `invitation:${invitation.id}`;
        const key = await core.sessions.start(user.id, "portal");
        return json({ user: { id: user.id, username: user.username } }, 201, { "Set-Cookie": sessionCookie(secure, key) });
      },
    },
    audit: { POST: "invitation.accept" },
    docs: {
      POST: {
        summary: "Use an invitation: makes the user with its settings, and signs them in (sets the session cookie)",
        body: AcceptBody,
        security: [],
        responses: {
          201: { description: "The user is made and signed in", schema: SignedInJson },
          409: { description: "USERNAME_TAKEN", schema: ErrorBody },
          410: { description: "INVITATION_INVALID: unknown, used, expired or withdrawn", schema: ErrorBody },
        },
      },
    },
  },
];
