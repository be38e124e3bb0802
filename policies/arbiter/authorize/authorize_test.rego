package arbiter.authorize_test

import data.arbiter.authorize
import data.arbiter.fixtures_test as f

authz(client, overrides) := f.input_with(client, f.alice, object.union(
	{
		"endpoint": "/authorize",
		"method": "GET",
	},
	overrides,
))

test_oidc_and_registered_scopes_are_granted if {
	asked := authz(f.public_client, {"scopes": ["openid", "profile", "invoices.write", "admin"]})
	d := authorize.decision with input as asked
	d.allow
	d.scopes == ["invoices.write", "openid", "profile"]
}

test_only_unknown_scopes_is_invalid_scope if {
	d := authorize.decision with input as authz(f.public_client, {"scopes": ["admin"]})
	d.error == "invalid_scope"
}

test_authorization_details_alone_are_allowed if {
	types := {"https://api.example/accounts": {"scopes": ["accounts.read"]}}
	details := [{"type": "https://api.example/accounts", "actions": ["read"]}]
	asked := authz(f.public_client, {"authorization_details": details})
	d := authorize.decision with input as asked with data.oauth.resource_types as types
	d.allow
	d.scopes == []
	d.authorization_details == details
}

test_unknown_client_is_refused if {
	d := authorize.decision with input as authz(null, {"scopes": ["openid"]})
	d.error == "unauthorized_client"
}

# --- several resource indicators (RFC 8707) ---------------------------------------------------

ledger := "https://ledger.example/"

mail := "https://mail.example/"

# Two resource types with a scope ceiling each, and a client registered for both types' scopes.
several_types := {
	"urn:example:ledger": {"scopes": ["ledger.read"]},
	"urn:example:mail": {"scopes": ["mail.send"]},
}

several_client := object.union(f.public_client, {"scopes": ["ledger.read", "mail.send", "invoices.read"]})

both_resources := [
	{"resource": ledger, "resolved_resource_type": "urn:example:ledger"},
	{"resource": mail, "resolved_resource_type": "urn:example:mail"},
]

test_each_resource_gets_its_own_scopes if {
	asked := authz(several_client, {
		"scopes": ["openid", "ledger.read", "mail.send"],
		"resources": both_resources,
	})
	d := authorize.decision with input as asked with data.oauth.resource_types as several_types
	d.allow
	d.scopes == ["ledger.read", "mail.send", "openid"]
	d.resources == [
		{"resource": ledger, "scopes": ["ledger.read"]},
		{"resource": mail, "scopes": ["mail.send"]},
	]
}

test_a_resource_refused_alone_refuses_the_request if {
	asked := authz(several_client, {
		"scopes": ["ledger.read"],
		"resources": both_resources,
	})
	d := authorize.decision with input as asked with data.oauth.resource_types as several_types
	not d.allow
	d.error == "invalid_target"
	d.error_description == concat("", ["none of the requested scopes may be granted to this client for: ", mail])
}

test_alone_that_resource_is_invalid_scope if {
	asked := authz(several_client, {
		"scopes": ["ledger.read"],
		"resource": mail,
		"resolved_resource_type": "urn:example:mail",
		"resources": [both_resources[1]],
	})
	d := authorize.decision with input as asked with data.oauth.resource_types as several_types
	d.error == "invalid_scope"
}

test_openid_keeps_a_resource_without_scopes_as_alone if {
	asked := authz(several_client, {
		"scopes": ["openid", "ledger.read"],
		"resources": both_resources,
	})
	d := authorize.decision with input as asked with data.oauth.resource_types as several_types
	d.allow
	d.scopes == ["ledger.read", "openid"]
	d.resources == [{"resource": ledger, "scopes": ["ledger.read"]}, {"resource": mail, "scopes": []}]
}

test_several_resources_never_widen_beyond_each_ceiling if {
	# invoices.read is the client's, but neither resource type's: no resource gets it.
	asked := authz(several_client, {
		"scopes": ["openid", "ledger.read", "mail.send", "invoices.read"],
		"resources": both_resources,
	})
	d := authorize.decision with input as asked with data.oauth.resource_types as several_types
	not "invoices.read" in d.scopes
	every grant in d.resources {
		not "invoices.read" in grant.scopes
	}
}

test_one_resource_is_decided_as_before_and_named_in_resources if {
	asked := authz(several_client, {
		"scopes": ["openid", "ledger.read", "mail.send"],
		"resource": ledger,
		"resolved_resource_type": "urn:example:ledger",
		"resources": [both_resources[0]],
	})
	d := authorize.decision with input as asked with data.oauth.resource_types as several_types
	d.scopes == ["ledger.read", "openid"]
	d.resources == [{"resource": ledger, "scopes": ["ledger.read"]}]
}

test_an_input_without_resources_is_decided_as_before if {
	asked := authz(f.public_client, {"scopes": ["openid", "invoices.read"]})
	d := authorize.decision with input as asked
	d.scopes == ["invoices.read", "openid"]
	not d.resources
}

test_withheld_scopes_are_not_granted_to_that_client if {
	clients := {"spa": {"withheld_scopes": ["invoices.write", "profile"]}}
	asked := authz(f.public_client, {"scopes": ["openid", "profile", "invoices.write", "invoices.read"]})
	d := authorize.decision with input as asked with data.oauth.clients as clients
	d.scopes == ["invoices.read", "openid"]
}
