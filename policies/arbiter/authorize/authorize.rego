package arbiter.authorize

import data.arbiter.lib

# METADATA
# title: GET /authorize
# description: |
#   Which scopes and authorization details the user's authorization may carry. Default pack:
#   openid, profile and email plus the client's registered scopes (and its entitlements for a
#   targeted resource type); unknown authorization_details types are refused. With several
#   resource indicators (RFC 8707), each resource gets the requested scopes its client may hold
#   for the resource's type (`resources`), and a resource that alone would be refused (none of
#   the requested scopes for it) refuses the whole request with invalid_target.
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
} else := lib.deny("invalid_target", refused_description) if {
	several
	count(refused_resources) > 0
} else := lib.no_scope_denial if {
	lib.nothing_grantable(requested, granted, input.request.authorization_details)
} else := object.union(lib.allow_with(granted, input.request, lib.resource_types), resource_grants)

has_client if is_string(input.client.client_id)

requested := {scope | some scope in input.request.scopes}

unknown_details := lib.unknown_detail_types(input.request.authorization_details, lib.resource_types, lib.rar_only_types)

target := lib.target_type(input.request, lib.resource_types)

allowed := lib.client_allowed_scopes(input.client, target, lib.resource_types)

# Every resource indicator of the request, each with the type it resolved to (none in an input
# written before `resources` existed: `resource` alone then says it).
default indicators := []

indicators := input.request.resources

several if count(indicators) > 1

# The requested scopes, OpenID Connect's aside, that the client may hold for a resource's type.
scopes_for(indicator) := (requested - lib.oidc_scopes) & lib.client_allowed_scopes(
	input.client,
	lib.target_type(indicator, lib.resource_types),
	lib.resource_types,
)

# Refused alone: scopes were asked for, and neither an OpenID Connect scope nor one for the resource.
refused_resources contains indicator.resource if {
	some indicator in indicators
	lib.nothing_grantable(
		requested,
		((requested & lib.oidc_scopes) | scopes_for(indicator)),
		input.request.authorization_details,
	)
}

refused_description := concat("", [
	"none of the requested scopes may be granted to this client for: ",
	concat(" ", sort(refused_resources)),
])

# Nothing requested, nothing granted: OpenID Connect needs openid to be asked for. With several
# resources, the OpenID Connect scopes and each resource's own. Scopes policy data withholds from
# the client (oauth.clients) are never granted.
granted := ((requested & lib.oidc_scopes) | {scope |
	some indicator in indicators
	some scope in scopes_for(indicator)
}) - withheld if {
	several
} else := lib.scopes_granted(requested, (lib.oidc_scopes | allowed) - withheld, set())

withheld := lib.withheld_scopes(input.client, lib.clients)

# What each resource's tokens may carry; none without a resource indicator.
default resource_grants := {}

resource_grants := {"resources": [{"resource": indicator.resource, "scopes": sort(scopes_for(indicator) - withheld)} |
	some indicator in indicators
]} if {
	count(indicators) > 0
}
