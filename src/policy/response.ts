/** A response the edge sends instead of forwarding (or instead of the service's, in on_http_response). */
export interface PolicyResponse {
  status: number;
  headers: [string, string][];
  body: string | Uint8Array;
}
