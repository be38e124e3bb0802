package arbiter.uma_permission

import data.arbiter.lib

# METADATA
# title: UMA 2.0 permissions, one resource at a time
# description: |
#   input.permission.operation says who asks:
#   - "ticket": POST /permission, a resource server asks for a permission ticket on one of its
#     owner's resources, for scopes the resource was registered with;
#   - "rpt": the UMA grant at /token, a client redeems a ticket for a requesting party token. The
#     resource owner gets what was asked; anyone else gets what the owner delegated to them.
# scope: document
# entrypoint: true
default decision := {
	"allow": false,
	"error": "request_denied",
	"error_description": "no policy allows this permission request",
}

permission := input.permission

decision := ticket if permission.operation == "ticket"

decision := rpt if permission.operation == "rpt"

# --- POST /permission ---------------------------------------------------------------------

# An unknown resource and another owner's are refused alike: the answer never reveals the other.
ticket := lib.deny("invalid_resource_id", "no resource with this id is registered for the caller") if {
	is_null(permission.resource)
} else := lib.deny("invalid_resource_id", "no resource with this id is registered for the caller") if {
	not caller_owns_resource
} else := lib.deny("invalid_scope", "requested scopes must be among the resource's scopes") if {
	count(requested - resource_scopes) > 0
} else := {"allow": true, "scopes": sort(requested)}

# --- the UMA grant ------------------------------------------------------------------------

rpt := lib.deny("invalid_grant", "the resource of the ticket is no longer registered") if {
	is_null(permission.resource)
} else := {"allow": true, "scopes": sort(requested & resource_scopes)} if {
	caller_owns_resource
} else := {"allow": true, "scopes": sort(requested & delegated)} if {
	count(requested & delegated) > 0
} else := need_info if {
	not lib.is_user(subject)
} else := lib.deny("request_denied", "the requesting party holds no permission on this resource")

# No requesting party was identified and the client alone holds nothing: say who should be.
need_info := {
	"allow": false,
	"error": "need_info",
	"error_description": "identify the requesting party with a claim token",
	"extensions": {"required_claims": [{
		"name": "sub",
		"friendly_name": "requesting party",
		"claim_token_format": ["urn:ietf:params:oauth:token-type:access_token"],
	}]},
}

# Scopes the resource owner delegated on this resource to the requesting party or to the client.
delegated contains scope if {
	some grant in object.get(input, "delegations", [])
	grant.resource_id == permission.resource_id
	is_grantee(grant)
	some scope in grant.scopes
}

is_grantee(grant) if {
	grant.grantee_type == "subject"
	lib.is_user(subject)
	grant.grantee_subject_id == subject.sub
}

is_grantee(grant) if {
	grant.grantee_type == "client"
	grant.grantee_client_id == input.client.client_id
}

caller_owns_resource if lib.owns(permission.resource, subject, input.client)

subject := object.get(input, "subject", null)

requested := {scope | some scope in permission.resource_scopes}

resource_scopes := {scope | some scope in permission.resource.resource_scopes}
