/** The UMA 2.0 grant type (UMA 2.0 Grant §3.3.1). */
export const UMA_TICKET = 'urn:ietf:params:oauth:grant-type:uma-ticket';

/** The claim token format Arbiter accepts: an access token of this server that stands for a user. */
export const ACCESS_TOKEN_CLAIMS = 'urn:ietf:params:oauth:token-type:access_token';

/** Every form parameter the grant reads (UMA 2.0 Grant §3.3.1; `pct` is accepted and unused). */
export const UMA_TICKET_PARAMETERS = ['ticket', 'claim_token', 'claim_token_format', 'rpt', 'pct', 'scope'];
