package arbiter.token

import data.arbiter.lib

# METADATA
# title: POST /token
# description: |
#   client_credentials, authorization_code, refresh_token and the RFC 8628 device code
#   grant (token exchange has its own point, arbiter.token_exchange).
# scope: document
# entrypoint: true
default decision := {
	"allow": false,
	"error": "unsupported_grant_type",
	"error_description": "no policy grants this grant type",
}

decision := lib.details_denial(unknown_details) if {
	count(unknown_details) > 0
} else := client_credentials if {
	input.request.grant_type == "client_credentials"
} else := user_grant if {
	input.request.grant_type in user_grant_types
}

# The RFC 8628 device code grant is asked once the user has approved the device; request.scopes
# then holds what the device asked for.
user_grant_types := {"authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"}

requested := {scope | some scope in input.request.scopes}

unknown_details := lib.unknown_detail_types(input.request.authorization_details, lib.resource_types, lib.rar_only_types)

target := lib.target_type(input.request, lib.resource_types)

allowed := lib.client_allowed_scopes(input.client, target, lib.resource_types) - withheld

withheld := lib.withheld_scopes(input.client, lib.clients)

# Confidential clients only; within their registered scopes (all of them when none is asked for),
# never `openid`: a client_credentials token stands for no user.
client_credentials := lib.deny("unauthorized_client", "client_credentials is for confidential clients") if {
	not lib.is_confidential(input.client)
} else := lib.no_scope_denial if {
	lib.nothing_grantable(requested, machine_scopes, input.request.authorization_details)
} else := lib.allow_with(machine_scopes, input.request, lib.resource_types)

machine_scopes := lib.scopes_granted(requested, allowed, allowed) - lib.user_only_scopes

# request.scopes holds the scopes granted at /authorize (authorization_code, device code) or asked for on refresh.
user_grant := lib.deny("invalid_grant", "the grant carries no user") if {
	not lib.is_user(object.get(input, "subject", null))
} else := lib.allow_with(user_scopes, input.request, lib.resource_types)

user_scopes := requested & ((lib.oidc_scopes | allowed) - withheld)
