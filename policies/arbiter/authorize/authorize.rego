# GET /authorize: which scopes and authorization details the user's authorization may carry.
# Default pack: openid, profile and email plus the client's registered scopes (and its
# entitlements for a targeted resource type); unknown authorization_details types are refused.
package arbiter.authorize

import data.arbiter.lib

default decision := {"allow": false, "error": "access_denied", "error_description": "no policy allows this authorization request"}

decision := lib.deny("unauthorized_client", "the client is unknown") if {
	not lib.has_client
} else := lib.details_denial if {
	lib.has_unknown_details
} else := lib.no_scope_denial if {
	lib.nothing_grantable(granted)
} else := lib.allow_with(granted)

# Nothing requested, nothing granted: OpenID Connect needs openid to be asked for.
granted := lib.scopes_granted(lib.oidc_scopes | lib.client_allowed_scopes, set())
