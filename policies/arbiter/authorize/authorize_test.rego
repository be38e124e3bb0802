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

test_withheld_scopes_are_not_granted_to_that_client if {
	clients := {"spa": {"withheld_scopes": ["invoices.write", "profile"]}}
	asked := authz(f.public_client, {"scopes": ["openid", "profile", "invoices.write", "invoices.read"]})
	d := authorize.decision with input as asked with data.oauth.clients as clients
	d.scopes == ["invoices.read", "openid"]
}
