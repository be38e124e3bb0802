package arbiter.introspect_test

import data.arbiter.fixtures_test as f
import data.arbiter.introspect

token := {
	"active": true,
	"token_type": "access_token",
	"client_id": "spa",
	"sub": "alice",
	"scopes": ["invoices.read"],
	"resource": null,
	"resource_types": [],
	"authorization_details": [],
	"exp": 1893456000,
	"iat": 1893452400,
}

introspection(caller, introspected) := object.union(
	f.input_with(f.confidential_client, f.alice, {"endpoint": "/introspect"}),
	{"token": introspected, "caller": caller, "context": {}},
)

bearer(scopes) := {"method": "bearer", "scopes": scopes, "resource_server": null}

test_bearer_with_introspection_scope_may_introspect if {
	d := introspect.decision with input as introspection(bearer(["introspection"]), token)
	d.allow
	d.scopes == ["invoices.read"]
}

test_bearer_with_uma_protection_may_introspect if {
	d := introspect.decision with input as introspection(bearer(["uma_protection"]), token)
	d.allow
}

test_bearer_without_those_scopes_may_not if {
	d := introspect.decision with input as introspection(bearer(["invoices.read"]), token)
	not d.allow
	d.error == "access_denied"
}

test_registered_resource_server_client_may_introspect if {
	caller := {
		"method": "client_secret_basic",
		"scopes": [],
		"resource_server": {"resource_indicator": "https://api.example", "type_uris": [], "capability": {}},
	}
	d := introspect.decision with input as introspection(caller, token)
	d.allow
}

test_inactive_token_is_not_allowed if {
	d := introspect.decision with input as introspection(bearer(["introspection"]), object.union(token, {"active": false}))
	not d.allow
}
