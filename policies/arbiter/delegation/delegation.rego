package arbiter.delegation

import data.arbiter.lib

# METADATA
# title: /delegation
# description: |
#   A resource owner delegates (a subset of) a resource's scopes to a user or a client until an
#   expiry in the future; revoking is always the owner's to do.
# scope: document
# entrypoint: true
default decision := {"allow": false, "error": "access_denied", "error_description": "no policy allows this delegation"}

delegation := input.delegation

# Revoking is the delegation's owner's to do (protocol code shows a delegation to its owner
# only), also once the resource is gone.
decision := {"allow": true} if {
	delegation.operation == "revoke"
} else := lib.deny("invalid_request", "the resource is not registered") if {
	is_null(delegation.resource)
} else := lib.deny("access_denied", "only the resource owner may delegate access to it") if {
	not caller_owns_resource
} else := lib.deny("invalid_scope", "delegated scopes must be among the resource's scopes") if {
	count(delegated - {scope | some scope in delegation.resource.resource_scopes}) > 0
} else := lib.deny("invalid_request", "expires_at must be in the future") if {
	is_string(delegation.expires_at)
	not expires_in_future
} else := {"allow": true, "scopes": sort(delegated)}

caller_owns_resource if lib.owns(delegation.resource, object.get(input, "subject", null), input.client)

# Undefined (so not in the future) when an instant cannot be parsed, e.g. before 1677.
expires_in_future if time.parse_rfc3339_ns(delegation.expires_at) > time.parse_rfc3339_ns(input.time)

delegated := {scope | some scope in delegation.scopes}
