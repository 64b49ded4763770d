/**
 * Traffic policy: rules in CEL with actions, in ngrok's format, run by the
 * edge on connections, requests and responses (docs/policy.md). This is
 * the module's face; the edge, the CLI and the tests import from here.
 */
export { loadPolicy, type LoadOptions } from "./load.ts";
export { Policy } from "./policy.ts";
export { PolicyChain, type ChainOutcome } from "./chain.ts";
export { BODY_UNREAD, type LogValue, type Outcome, type Verdict, type RuleTrace, type ActionTrace, type RunProblem } from "./outcome.ts";
export type { PolicyInput, ConnectionFacts, EndpointFacts, TunnelFacts, RequestFacts, ResponseFacts } from "./facts.ts";
export type { PolicyResponse } from "./response.ts";
export { formatPolicyError, POLICY_ERRORS, type PolicyError, type PolicyErrorCode } from "./errors.ts";
export { DEFAULT_POLICY_LIMITS, MAX_BODY_BYTES, type PolicyLimits } from "./limits.ts";
export { defaultServices, NOT_SIGNED_IN, RemoteKeySets, type PolicyServices, type OidcAdapter, type OidcRequest, type OidcSettings, type KeySets, type JwksSettings } from "./services.ts";
export { HTTP_REQUEST_ERRORS, type HttpRequestErrorCode, type OutgoingAnswer, type OutgoingRequest, type OutgoingResult, type PolicyHttpClient } from "./http-client.ts";
export { MemoryRateLimitStore, type RateLimitStore, type RateLimitVerdict } from "./rate-limit-store.ts";
export { compressionFor, createCompressor, negotiate, type Coding, type ResponseCompressor } from "./compression.ts";
export { PHASES, VARIABLES, type Phase } from "./variables.ts";
export { GEO_PREFIX, UNKNOWN_PLACE, type GeoFacts, type GeoLookup } from "./geo.ts";
export { ACTIONS, NOT_IN_BURROW } from "./actions/index.ts";
export { RATE_LIMITED } from "./actions/rate-limit.ts";
export { bodyText, replaceAll, ReplaceFailed, type Replacement } from "./actions/body-replace.ts";
export { isEventStream } from "./actions/sse-find-replace.ts";
export { rewriteEvent, MAX_EVENT_GROWTH } from "./sse-event.ts";
export type { StreamReplacement } from "./message.ts";
