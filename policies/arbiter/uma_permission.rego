# POST /permission (UMA 2.0): a resource server asks for a permission ticket on one of its
# owner's resources, for scopes the resource was registered with.
package arbiter.uma_permission

import data.arbiter.lib

default decision := {"allow": false, "error": "invalid_resource_id", "error_description": "no policy allows this permission request"}

decision := lib.deny("invalid_resource_id", "the resource is not registered") if {
	is_null(input.permission.resource)
} else := lib.deny("invalid_resource_id", "the resource is not owned by the caller") if {
	not caller_owns_resource
} else := lib.deny("invalid_scope", "requested scopes must be among the resource's scopes") if {
	count(requested - {scope | some scope in input.permission.resource.resource_scopes}) > 0
} else := {"allow": true, "scopes": sort(requested)}

caller_owns_resource if lib.owns(input.permission.resource)

requested := {scope | some scope in input.permission.resource_scopes}
