package arbiter.register_test

import data.arbiter.fixtures_test as f
import data.arbiter.register

registration(statement, grant_types) := object.union(
	f.input_with(null, null, {"endpoint": "/register"}),
	{"registration": {
		"metadata": {"redirect_uris": ["https://app.example/cb"], "scope": "openid email invoices.read"},
		"grant_types": grant_types,
		"token_endpoint_auth_method": "client_secret_basic",
		"client_type": "confidential",
		"software_statement": statement,
	}},
)

open_policy := {"enabled": true, "dcr": {"allowed_grant_types": ["authorization_code", "refresh_token"]}}

statement(claims) := {"verified": true, "claims": claims}

trusted := {"https://issuer.example": {"jwks_uri": "https://issuer.example/jwks"}}

test_open_registration_is_disabled_by_default if {
	d := register.decision with input as registration(null, ["authorization_code"])
	not d.allow
	d.error == "invalid_client_metadata"
}

test_open_registration_when_enabled_grants_oidc_scopes if {
	asked := registration(null, ["authorization_code"])
	d := register.decision with input as asked with data.oauth.public_client_policy as open_policy
	d.allow
	d.scopes == ["email", "openid"]
}

test_open_registration_refuses_other_grant_types if {
	asked := registration(null, ["client_credentials"])
	d := register.decision with input as asked with data.oauth.public_client_policy as open_policy
	not d.allow
	contains(d.error_description, "client_credentials")
}

test_statement_from_untrusted_issuer_is_invalid if {
	d := register.decision with input as registration(statement({"iss": "https://evil.example"}), ["authorization_code"])
	d.error == "invalid_software_statement"
}

test_denylisted_software_is_unapproved if {
	claims := {"iss": "https://issuer.example", "software_id": "bad-app"}
	d := register.decision with input as registration(statement(claims), ["authorization_code"])
		with data.oauth.trusted_issuers as trusted
		with data.oauth.software_statements.denylist as ["bad-app"]
	d.error == "unapproved_software_statement"
}

test_denylisted_software_is_unapproved_in_any_letter_case if {
	upper := {"iss": "https://issuer.example", "software_id": "0D6C3F5E-2B1A-4C8D-9E7F-112233445566"}
	d := register.decision with input as registration(statement(upper), ["authorization_code"])
		with data.oauth.trusted_issuers as trusted
		with data.oauth.software_statements.denylist as ["0d6c3f5e-2b1a-4c8d-9e7f-112233445566"]
	d.error == "unapproved_software_statement"
	lower := {"iss": "https://issuer.example", "software_id": "0d6c3f5e-2b1a-4c8d-9e7f-112233445566"}
	e := register.decision with input as registration(statement(lower), ["authorization_code"])
		with data.oauth.trusted_issuers as trusted
		with data.oauth.software_statements.denylist as ["0D6C3F5E-2B1A-4C8D-9E7F-112233445566"]
	e.error == "unapproved_software_statement"
}

test_statement_entitlements_are_kept_within_known_types if {
	claims := {
		"iss": "https://issuer.example",
		"software_id": "good-app",
		"grant_types": ["client_credentials"],
		"granted_resources": [
			{"type": "urn:as:introspect", "scopes": ["uma_protection", "root"]},
			{"type": "urn:unknown", "scopes": ["x"]},
		],
	}
	asked := registration(statement(claims), ["client_credentials", "authorization_code"])
	d := register.decision with input as asked with data.oauth.trusted_issuers as trusted
	d.allow
	d.scopes == ["uma_protection"]
	d.extensions.granted_resources == [{"type": "urn:as:introspect", "scopes": ["uma_protection"]}]
	d.extensions.grant_types == ["client_credentials"]
}

test_statement_without_issuer_is_invalid if {
	asked := registration(statement({"software_id": "x"}), ["authorization_code"])
	d := register.decision with input as asked with data.oauth.trusted_issuers as trusted
	d.error == "invalid_software_statement"
}

iat_registration(token) := object.union(
	registration(null, ["authorization_code"]),
	{"registration": {"initial_access_token": token}},
)

required_iat := {
	"enabled": true,
	"dcr": {"allowed_grant_types": ["authorization_code", "refresh_token"], "require_initial_access_token": true},
}

test_initial_access_token_required_and_missing_is_invalid_token if {
	d := register.decision with input as iat_registration(null) with data.oauth.public_client_policy as required_iat
	not d.allow
	d.error == "invalid_token"
}

test_initial_access_token_required_and_presented_allows if {
	asked := iat_registration({"id": 1, "name": "partner"})
	d := register.decision with input as asked with data.oauth.public_client_policy as required_iat
	d.allow
}

test_initial_access_token_permits_registration_while_open_registration_is_off if {
	d := register.decision with input as iat_registration({"id": 1, "name": null})
	d.allow
}

# RFC 7592: an update is authenticated by the client's registration access token.
update_of(asked) := object.union(asked, {"request": {"method": "PUT", "endpoint": "/register/a-client"}})

test_an_update_needs_no_initial_access_token if {
	d := register.decision with input as update_of(iat_registration(null))
		with data.oauth.public_client_policy as required_iat
	d.allow
}

test_an_update_needs_no_open_registration if {
	d := register.decision with input as update_of(registration(null, ["authorization_code"]))
	d.allow
}

test_an_update_is_decided_again if {
	asked := update_of(registration(null, ["client_credentials"]))
	d := register.decision with input as asked with data.oauth.public_client_policy as open_policy
	not d.allow
	contains(d.error_description, "client_credentials")
}

# The client as it stands, after an operator narrowed it to `openid` and the code flow.
narrowed := {
	"client_id": "a-client",
	"scopes": ["openid"],
	"grant_types": ["authorization_code"],
	"granted_resources": [{"type": "urn:as:introspect", "scopes": []}],
}

test_an_update_never_widens_the_client_as_it_stands if {
	asked := object.union(
		update_of(registration(null, ["authorization_code", "refresh_token"])),
		{"client": narrowed},
	)
	d := register.decision with input as asked with data.oauth.public_client_policy as open_policy
	d.allow
	d.scopes == ["openid"]
	d.extensions.grant_types == ["authorization_code"]
}

test_an_update_never_widens_the_entitlements_of_a_statement if {
	claims := {
		"iss": "https://issuer.example",
		"software_id": "good-app",
		"grant_types": ["client_credentials"],
		"granted_resources": [{"type": "urn:as:introspect", "scopes": ["uma_protection"]}],
	}
	client := object.union(narrowed, {"grant_types": ["client_credentials"]})
	asked := object.union(update_of(registration(statement(claims), ["client_credentials"])), {"client": client})
	d := register.decision with input as asked with data.oauth.trusted_issuers as trusted
	d.allow
	d.scopes == []
	d.extensions.granted_resources == [{"type": "urn:as:introspect", "scopes": []}]
}

test_an_unverified_statement_of_a_trusted_issuer_is_refused if {
	issuers := {"https://issuer.example": {"jwks_uri": "https://issuer.example/jwks"}}
	unverified := {"verified": false, "claims": {"iss": "https://issuer.example", "software_id": "app"}}
	asked := registration(unverified, ["client_credentials"])
	d := register.decision with input as asked with data.oauth.trusted_issuers as issuers
	not d.allow
	d.error == "invalid_software_statement"
}
