package arbiter.authorize

import data.arbiter.lib

# METADATA
# title: GET /authorize
# description: |
#   Which scopes and authorization details the user's authorization may carry. Default pack:
#   openid, profile and email plus the client's registered scopes (and its entitlements for a
#   targeted resource type); unknown authorization_details types are refused.
# scope: document
# entrypoint: true
default decision := {
	"allow": false,
	"error": "access_denied",
	"error_description": "no policy allows this authorization request",
}

decision := lib.deny("unauthorized_client", "the client is unknown") if {
	not has_client
} else := lib.details_denial(unknown_details) if {
	count(unknown_details) > 0
} else := lib.no_scope_denial if {
	lib.nothing_grantable(requested, granted, input.request.authorization_details)
} else := lib.allow_with(granted, input.request, lib.resource_types)

has_client if is_string(input.client.client_id)

requested := {scope | some scope in input.request.scopes}

unknown_details := lib.unknown_detail_types(input.request.authorization_details, lib.resource_types, lib.rar_only_types)

target := lib.target_type(input.request, lib.resource_types)

allowed := lib.client_allowed_scopes(input.client, target, lib.resource_types)

# Nothing requested, nothing granted: OpenID Connect needs openid to be asked for. Scopes policy
# data withholds from the client (oauth.clients) are never granted.
granted := lib.scopes_granted(requested, (lib.oidc_scopes | allowed) - withheld, set())

withheld := lib.withheld_scopes(input.client, lib.clients)
