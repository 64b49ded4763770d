/**
 * The inspector API's refusals: one code, one status, given here once. A
 * refusal is answered as the admin API answers (`{"error": message}`), with
 * its stable code beside it for scripts (`"code"`).
 */
export const INSPECTOR_ERRORS = {
  BAD_REQUEST: 400,
  /** Not the inspector's own Host: a page on another name that resolves here (DNS rebinding). */
  HOST_REFUSED: 403,
  /** A write from another site's page. */
  CROSS_SITE: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  /** The capture cannot be sent again as it was (its body was cut, or it is a WebSocket). */
  NOT_REPLAYABLE: 409,
  PAYLOAD_TOO_LARGE: 413,
  /** Too many live streams open at once. */
  TOO_MANY_STREAMS: 503,
} as const;

export type InspectorErrorCode = keyof typeof INSPECTOR_ERRORS;

export class InspectorError extends Error {
  readonly status: number;

  constructor(
    readonly code: InspectorErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = INSPECTOR_ERRORS[code];
  }
}

export const badRequest = (message: string) => new InspectorError("BAD_REQUEST", message);
