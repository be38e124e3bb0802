# POST /token for client_credentials, authorization_code and refresh_token
# (token exchange has its own point, arbiter.token_exchange).
package arbiter.token

import data.arbiter.lib

default decision := {"allow": false, "error": "unsupported_grant_type", "error_description": "no policy grants this grant type"}

decision := lib.details_denial if {
	lib.has_unknown_details
} else := client_credentials if {
	input.request.grant_type == "client_credentials"
} else := user_grant if {
	input.request.grant_type in {"authorization_code", "refresh_token"}
}

# Confidential clients only; within their registered scopes (all of them when none is asked for).
client_credentials := lib.deny("unauthorized_client", "client_credentials is for confidential clients") if {
	not lib.confidential_client
} else := lib.no_scope_denial if {
	lib.nothing_grantable(machine_scopes)
} else := lib.allow_with(machine_scopes)

machine_scopes := lib.scopes_granted(lib.client_allowed_scopes, lib.client_allowed_scopes)

# request.scopes holds the scopes granted at /authorize (authorization_code) or asked for on refresh.
user_grant := lib.deny("invalid_grant", "the grant carries no user") if {
	not lib.has_subject
} else := lib.allow_with(lib.requested_scopes & (lib.oidc_scopes | lib.client_allowed_scopes))
