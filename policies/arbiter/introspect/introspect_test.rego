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

# RFC 7662 §4: a resource server is shown only the tokens issued for it.

A := "https://a.example/"

B := "https://b.example/"

resource_server(method, indicators) := {
	"method": method,
	"scopes": [],
	"resource_server": {"resource_indicator": indicators[0], "type_uris": [], "capability": {}},
	"resource_indicators": indicators,
}

for_audiences(audiences) := object.union(token, {"resource": audiences[0], "audiences": audiences})

test_resource_server_is_shown_a_token_issued_for_it if {
	d := introspect.decision with input as introspection(resource_server("client_secret_basic", [A]), for_audiences([A]))
	d.allow
}

test_resource_server_is_not_shown_a_token_issued_for_another if {
	d := introspect.decision with input as introspection(resource_server("client_secret_basic", [B]), for_audiences([A]))
	not d.allow
	d.error == "access_denied"
	d.error_description == "the token was not issued for this resource server"
}

test_resource_server_with_a_bearer_token_is_not_shown_a_token_issued_for_another if {
	caller := object.union(resource_server("bearer", [B]), {"scopes": ["introspection"]})
	d := introspect.decision with input as introspection(caller, for_audiences([A]))
	not d.allow
}

test_each_audience_of_a_token_with_several_is_shown_it if {
	two := for_audiences([A, "https://c.example/"])
	introspect.decision.allow with input as introspection(resource_server("private_key_jwt", [A]), two)
	introspect.decision.allow with input as introspection(resource_server("private_key_jwt", ["https://c.example/"]), two)
	not introspect.decision.allow with input as introspection(resource_server("private_key_jwt", [B]), two)
}

test_client_introspecting_for_several_resource_servers_is_shown_the_tokens_of_each if {
	caller := resource_server("client_secret_basic", [B, A])
	introspect.decision.allow with input as introspection(caller, for_audiences([A]))
	introspect.decision.allow with input as introspection(caller, for_audiences([B]))
}

test_resource_server_is_shown_a_token_issued_for_no_resource if {
	d := introspect.decision with input as introspection(resource_server("client_secret_basic", [B]), token)
	d.allow
}

test_caller_that_is_no_resource_server_is_shown_every_token if {
	introspect.decision.allow with input as introspection(bearer(["introspection"]), for_audiences([A]))

	# The fixture client is entitled to urn:as:introspect.
	entitled := {"method": "client_secret_basic", "scopes": [], "resource_server": null, "resource_indicators": []}
	introspect.decision.allow with input as introspection(entitled, for_audiences([A]))
}

test_input_recorded_before_audiences_uses_resource_and_resource_server if {
	old_caller := {
		"method": "client_secret_basic",
		"scopes": [],
		"resource_server": {"resource_indicator": B, "type_uris": [], "capability": {}},
	}
	not introspect.decision.allow with input as introspection(old_caller, object.union(token, {"resource": A}))
	introspect.decision.allow with input as introspection(old_caller, object.union(token, {"resource": B}))
}

test_an_inactive_token_is_refused_as_inactive_first if {
	inactive := object.union(for_audiences([A]), {"active": false})
	d := introspect.decision with input as introspection(resource_server("client_secret_basic", [B]), inactive)
	d.error == "invalid_token"
}
