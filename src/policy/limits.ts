/**
 * The caps on a policy, each with its default. A policy is written by an
 * operator or by an agent's user, and an agent's user is not trusted with
 * the edge's CPU or memory: everything a document can make the edge do per
 * request is bounded here, and a document past a cap is refused at load
 * with an error that names the cap, never slowed down at request time.
 * docs/limits.md lists them, each with the server's flag that sets it
 * (config/server.ts); `burrow policy check` and an agent's own check use
 * these defaults.
 */

export interface PolicyLimits {
  /** Bytes of the document's text. */
  maxDocumentBytes: number;
  /** Rules in all phases together. */
  maxRules: number;
  /** Expressions of one rule. */
  maxExpressionsPerRule: number;
  /** Actions of one rule. */
  maxActionsPerRule: number;
  /** Characters of one CEL expression (an interpolation's included). */
  maxExpressionLength: number;
  /** How deeply an expression's parts may nest (calls, operators, lists, selections). */
  maxExpressionDepth: number;
  /** Parts (nodes of its syntax tree) of one expression, macros expanded: what a huge literal list is counted by. */
  maxExpressionNodes: number;
  /**
   * The cost one run of a policy's phase may spend, and what one expression
   * is estimated at most to spend at load: a unit is one step of a macro's
   * loop (`exists`, `all`, `map`, `filter`...), one KiB a string function
   * makes or digests, or one entry a list, JSON or query-string function
   * reads or makes (`sort`, `lists.range`, `json.decode`...). An estimate counts a list or map of the request as
   * COLLECTION_ESTIMATE entries.
   */
  costLimit: number;
  /** `${...}` interpolations in one string. */
  maxInterpolations: number;
  /** Bytes of one log action's metadata, as JSON, as written. */
  maxLogMetadataBytes: number;
  /** How deeply a log action's metadata nests maps and lists (a field whose value is a map: one level). */
  maxLogMetadataDepth: number;
  /**
   * The longest string or bytes value an expression may make (a
   * concatenation, a replace, a join). This and the two below are read at
   * run time by the functions (cel/cost.ts, cel/json-functions.ts,
   * cel/list-functions.ts), from the run's scope: the caps of the policy
   * that runs.
   */
  maxValueBytes: number;
  /** The most entries one list or map function may make (`lists.range`, `flatten`, `json.decode`, `queryString.decode`), whatever the run's cost limit. */
  maxMadeEntries: number;
  /** How deeply a JSON value decoded by `json.decode` or `decodeJson` (or one encoded) may nest its lists and maps. */
  maxJsonDepth: number;
  /** Characters of a redirect's or url-rewrite's `from` pattern (at load when constant, at run time when interpolated). */
  maxPatternLength: number;
  /** Steps one redirect's or url-rewrite's match and replace may take on a URL (regex.ts: the patterns run in linear time, a replace-all may not). */
  maxPatternSteps: number;
}

export const DEFAULT_POLICY_LIMITS: Readonly<PolicyLimits> = {
  maxDocumentBytes: 1024 * 1024,
  maxRules: 1000,
  maxExpressionsPerRule: 16,
  maxActionsPerRule: 16,
  maxExpressionLength: 4096,
  maxExpressionDepth: 64,
  maxExpressionNodes: 1000,
  costLimit: 10_000,
  maxInterpolations: 16,
  maxLogMetadataBytes: 8 * 1024,
  maxLogMetadataDepth: 4,
  maxValueBytes: 1024 * 1024,
  maxMadeEntries: 100_000,
  maxJsonDepth: 32,
  maxPatternLength: 1024,
  maxPatternSteps: 1_000_000,
};

/**
 * How many entries a list or map the request brings (its headers, a
 * header's values, query parameters, cookies, a split string) is taken to
 * have when an expression's cost is estimated at load. A loop over the
 * headers costs 50; one inside another, 2,550; three deep, 127,550, over
 * the cap. The runtime count is exact and is what stops a run.
 */
export const COLLECTION_ESTIMATE = 50;

/** The request body the edge reads for the actions that need it (verify-webhook), by default (its --policy-body-limit); a larger one is not handed over. */
export const MAX_BODY_BYTES = 1024 * 1024;

