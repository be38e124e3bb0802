package arbiter.token_test

import data.arbiter.fixtures_test as f
import data.arbiter.token

cc(client, overrides) := f.input_with(client, null, object.union({"grant_type": "client_credentials"}, overrides))

test_client_credentials_grants_requested_registered_scopes if {
	d := token.decision with input as cc(f.confidential_client, {"scopes": ["invoices.read", "admin"]})
	d.allow
	d.scopes == ["invoices.read"]
}

test_client_credentials_without_scope_grants_all_registered_scopes if {
	d := token.decision with input as cc(f.confidential_client, {})
	d.scopes == ["invoices.read", "invoices.write"]
}

oidc_client := object.union(f.confidential_client, {"scopes": ["openid", "profile", "invoices.read"]})

test_client_credentials_without_scope_never_grants_openid if {
	d := token.decision with input as cc(oidc_client, {})
	d.allow
	d.scopes == ["invoices.read", "profile"]
}

test_client_credentials_asking_for_openid_gets_the_rest if {
	d := token.decision with input as cc(oidc_client, {"scopes": ["openid", "invoices.read"]})
	d.allow
	d.scopes == ["invoices.read"]
}

test_client_credentials_asking_only_for_openid_is_invalid_scope if {
	d := token.decision with input as cc(oidc_client, {"scopes": ["openid"]})
	not d.allow
	d.error == "invalid_scope"
}

test_client_credentials_denied_to_public_clients if {
	d := token.decision with input as cc(f.public_client, {})
	not d.allow
	d.error == "unauthorized_client"
}

test_client_credentials_denied_when_no_requested_scope_is_allowed if {
	d := token.decision with input as cc(f.confidential_client, {"scopes": ["admin"]})
	not d.allow
	d.error == "invalid_scope"
}

test_protection_token_uses_entitlement_within_type_ceiling if {
	asked := cc(f.confidential_client, {"resource": "urn:as:introspect", "scopes": ["introspection", "uma_protection"]})
	d := token.decision with input as asked
	d.allow
	d.scopes == ["introspection"]
}

test_resource_type_outputs_are_relayed if {
	types := {"https://api.example/payments": {
		"scopes": ["invoices.read"],
		"obligations": {"log": true},
		"jit_single_use": true,
	}}
	request_input := cc(f.confidential_client, {"resolved_resource_type": "https://api.example/payments"})
	d := token.decision with input as request_input with data.oauth.resource_types as types
	d.scopes == ["invoices.read"]
	d.obligations == {"log": true}
	d.jit_single_use == true
}

test_unknown_authorization_details_type_is_refused if {
	d := token.decision with input as cc(f.confidential_client, {"authorization_details": [{"type": "urn:unknown"}]})
	d.error == "invalid_authorization_details"
}

test_known_rar_only_type_is_granted if {
	details := [{"type": "payment_initiation", "amount": "10.00"}]
	request_input := cc(f.confidential_client, {"authorization_details": details, "scopes": ["invoices.read"]})
	d := token.decision with input as request_input with data.oauth.rar_only_types as {"payment_initiation": {}}
	d.allow
	d.authorization_details == details
}

test_authorization_code_grants_oidc_and_registered_scopes if {
	request_input := f.input_with(f.public_client, f.alice, {
		"grant_type": "authorization_code",
		"scopes": ["openid", "email", "invoices.read", "other"],
	})
	d := token.decision with input as request_input
	d.allow
	d.scopes == ["email", "invoices.read", "openid"]
}

test_authorization_code_needs_a_user if {
	request_input := f.input_with(f.public_client, null, {"grant_type": "authorization_code", "scopes": ["openid"]})
	d := token.decision with input as request_input
	not d.allow
}

device_grant := "urn:ietf:params:oauth:grant-type:device_code"

test_device_code_grants_oidc_and_registered_scopes if {
	request_input := f.input_with(f.public_client, f.alice, {
		"grant_type": device_grant,
		"scopes": ["openid", "invoices.read", "other"],
	})
	d := token.decision with input as request_input
	d.allow
	d.scopes == ["invoices.read", "openid"]
}

test_device_code_needs_a_user if {
	request_input := f.input_with(f.public_client, null, {"grant_type": device_grant, "scopes": ["openid"]})
	d := token.decision with input as request_input
	not d.allow
	d.error == "invalid_grant"
}

test_password_grant_is_not_granted if {
	d := token.decision with input as cc(f.confidential_client, {"grant_type": "password"})
	d.error == "unsupported_grant_type"
}

withheld := {"billing-service": {"withheld_scopes": ["invoices.write", "openid"]}}

test_withheld_scopes_are_never_granted_to_that_client if {
	asked := cc(f.confidential_client, {"scopes": ["invoices.read", "invoices.write"]})
	d := token.decision with input as asked with data.oauth.clients as withheld
	d.scopes == ["invoices.read"]
	all := token.decision with input as cc(f.confidential_client, {}) with data.oauth.clients as withheld
	all.scopes == ["invoices.read"]
	write_only := cc(f.confidential_client, {"scopes": ["invoices.write"]})
	only := token.decision with input as write_only with data.oauth.clients as withheld
	only.error == "invalid_scope"
	scopes := ["openid", "invoices.write", "invoices.read"]
	code := f.input_with(f.confidential_client, f.alice, {"grant_type": "authorization_code", "scopes": scopes})
	user := token.decision with input as code with data.oauth.clients as withheld
	user.scopes == ["invoices.read"]
}
