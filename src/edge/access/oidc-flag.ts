/**
 * The tunnel's own OIDC sign-in (--oidc-issuer, burrow.yml's `oidc`, the
 * SDK's) as the openid-connect action of its flags layer asks it
 * (flag-layer.ts; policy/services.ts OidcAdapter): the gate made at the
 * handshake, with the provider its discovery found and the keys derived
 * from the tunnel's name (oidc.ts), so its pages, cookies and sessions are
 * what they always were: the callback at /_burrow/oidc/callback finishes
 * a sign-in (or says why not), a session cookie lets the visitor in, a
 * browser opening a page is sent to sign in and anything else gets 401.
 * The action around it takes the session cookie off the request and tells
 * the service the email.
 */
import type { OidcAdapter, OidcRequest } from "../../policy/index.ts";
import { badRequestPage } from "../pages.ts";
import { askSignIn, finishSignIn, gateRequest, responded, sessionOnly, type OidcVerdict } from "./oidc-answers.ts";
import { CALLBACK_PATH, type OidcGate } from "./oidc.ts";

export class TunnelSignIn implements OidcAdapter {
  constructor(private readonly gate: OidcGate) {}

  async admit(request: OidcRequest): Promise<OidcVerdict> {
    const { gate } = this;
    const { host, secure } = request;
    const asked = gateRequest(request);
    if (!asked) return responded(badRequestPage("This request cannot be checked against the tunnel's access rules."));
    const { req, url } = asked;
    // a visit judged again (traffic-policy/live-rejudge.ts): its session alone
    if (request.rejudging) return sessionOnly(gate, req, host);
    if (url.pathname === CALLBACK_PATH) return responded(await finishSignIn(gate, req, url, host, secure));
    const email = await gate.session(req, host);
    if (email !== undefined) return { kind: "signed-in", email, stripCookies: [gate.sessionCookie] };
    return responded(await askSignIn(gate, req, url, host, secure));
  }
}
