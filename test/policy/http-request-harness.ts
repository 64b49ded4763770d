/**
 * What the http-request tests share: services whose client reaches
 * loopback (allowPrivate unless a test says otherwise), and a policy whose
 * first rule makes the request and whose second tells what it read, in
 * headers of the request it lets through.
 */
import { OutgoingRequests, type OutgoingLimits } from "../../src/edge/traffic-policy/outgoing-requests.ts";
import { defaultServices, type Outcome } from "../../src/policy/index.ts";
import { policyOf } from "./policy-harness.ts";

export const loopbackClient = (limits: Partial<OutgoingLimits> = {}) => new OutgoingRequests({ allowPrivate: true, ...limits });
export const loopbackServices = (limits: Partial<OutgoingLimits> = {}) => defaultServices({ httpRequests: loopbackClient(limits) });

/** x-status (the answer's, or none), x-error (the error's code, or none), x-attempts (how many got an answer). */
export function asking(config: string, limits: Partial<OutgoingLimits> = {}) {
  return policyOf(
    `
on_http_request:
  - actions:
      - type: http-request
        config: ${config}
  - actions:
      - type: add-headers
        config:
          headers:
            x-status: "\${has(actions.ngrok.http_request.res) ? string(actions.ngrok.http_request.res.status_code) : 'none'}"
            x-error: "\${has(actions.ngrok.http_request.error) ? actions.ngrok.http_request.error.code : 'none'}"
            x-attempts: "\${string(size(actions.ngrok.http_request.attempts))}"
`,
    { services: loopbackServices(limits) },
  );
}

/** A header of the request the run let through. */
export const header = (out: Outcome, name: string) => out.request!.headers.find(([n]) => n === name)?.[1];
