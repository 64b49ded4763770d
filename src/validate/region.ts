/** What a node's region (--region, `conn.server_region`) may be: a lower-case name such as `eu` or `us-east-1`; also what one from another node must look like to be read. */
export const REGION_FORM = /^[a-z0-9-]{1,63}$/;
