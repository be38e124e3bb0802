package arbiter.token_exchange_test

import data.arbiter.fixtures_test as f
import data.arbiter.token_exchange

exchange_type := "urn:ietf:params:oauth:grant-type:token-exchange"

access_token := {
	"token_type": "urn:ietf:params:oauth:token-type:access_token",
	"active": true,
	"iss": "http://localhost:9000",
	"sub": "alice",
	"client_id": "billing-service",
	"scopes": ["invoices.read", "openid"],
	"resource": null,
	"exp": 1893456000,
}

id_token := object.union(access_token, {
	"token_type": "urn:ietf:params:oauth:token-type:id_token",
	"iss": "https://idp.example",
	"client_id": null,
	"scopes": [],
})

exchange(client, subject_token, overrides) := object.union(
	f.input_with(client, f.alice, object.union({"grant_type": exchange_type}, overrides)),
	{"subject_token": subject_token},
)

test_subset_of_subject_token_scopes_is_granted if {
	d := token_exchange.decision with input as exchange(f.confidential_client, access_token, {"scopes": ["invoices.read"]})
	d.allow
	d.scopes == ["invoices.read"]
}

test_scope_beyond_subject_token_is_invalid_grant if {
	asked := exchange(f.confidential_client, access_token, {"scopes": ["invoices.write"]})
	d := token_exchange.decision with input as asked
	not d.allow
	d.error == "invalid_grant"
}

test_public_client_is_refused if {
	d := token_exchange.decision with input as exchange(f.public_client, access_token, {})
	d.error == "unauthorized_client"
}

test_inactive_subject_token_is_refused if {
	asked := exchange(f.confidential_client, object.union(access_token, {"active": false}), {})
	d := token_exchange.decision with input as asked
	d.error == "invalid_grant"
}

test_id_token_from_untrusted_issuer_is_refused if {
	d := token_exchange.decision with input as exchange(f.confidential_client, id_token, {})
	not d.allow
	startswith(d.error_description, "untrusted_token_issuer")
}

test_id_token_from_trusted_issuer_gets_client_scopes if {
	issuers := {"https://idp.example": {"jwks_uri": "https://idp.example/jwks"}}
	asked := exchange(f.confidential_client, id_token, {})
	d := token_exchange.decision with input as asked with data.oauth.trusted_issuers as issuers
	d.allow
	d.scopes == ["invoices.read", "invoices.write"]
}

test_issuer_trusted_only_for_statements_is_refused if {
	issuers := {"https://idp.example": {"uses": ["software_statement"]}}
	asked := exchange(f.confidential_client, id_token, {})
	d := token_exchange.decision with input as asked with data.oauth.trusted_issuers as issuers
	not d.allow
}

test_id_token_without_issuer_is_refused if {
	no_issuer := object.remove(id_token, ["iss"])
	asked := exchange(f.confidential_client, no_issuer, {})
	d := token_exchange.decision with input as asked with data.oauth.trusted_issuers as {"https://idp.example": {}}
	not d.allow
}

test_unverified_id_token_from_untrusted_issuer_names_the_issuer if {
	unverified := object.union(id_token, {"active": false})
	d := token_exchange.decision with input as exchange(f.confidential_client, unverified, {})
	not d.allow
	startswith(d.error_description, "untrusted_token_issuer")
}

actor_token := object.union(access_token, {"sub": null, "client_id": "billing-service"})

with_actor(subject_token, actor) := object.union(
	exchange(f.confidential_client, subject_token, {"scopes": ["invoices.read"]}),
	{"actor_token": actor},
)

test_an_actor_is_allowed_without_may_act if {
	d := token_exchange.decision with input as with_actor(access_token, actor_token)
	d.allow
}

test_may_act_naming_the_actor_allows if {
	asked := with_actor(object.union(access_token, {"may_act": {"sub": "billing-service"}}), actor_token)
	d := token_exchange.decision with input as asked
	d.allow
}

test_may_act_naming_another_party_denies if {
	asked := with_actor(object.union(access_token, {"may_act": {"sub": "someone-else"}}), actor_token)
	d := token_exchange.decision with input as asked
	not d.allow
	d.error == "invalid_grant"
	contains(d.error_description, "may_act")
}

test_an_inactive_actor_token_denies if {
	d := token_exchange.decision with input as with_actor(access_token, object.union(actor_token, {"active": false}))
	not d.allow
	contains(d.error_description, "actor token")
}

# --- whose token may be exchanged (RFC 8693 §1, RFC 9449) ------------------------------------

another_clients_token := object.union(access_token, {"client_id": "spa"})

delegation_from(owner, grantee) := {
	"delegation_id": "d1", "grantee_type": "client", "grantee_subject_id": null, "grantee_client_id": grantee,
	"resource_id": "r1", "scopes": ["invoices.read"], "expires_at": null, "owner": {"sub": owner, "client_id": null},
}

test_another_clients_token_is_refused if {
	asked := exchange(f.confidential_client, another_clients_token, {"scopes": ["invoices.read"]})
	d := token_exchange.decision with input as asked
	not d.allow
	d.error == "invalid_grant"
	contains(d.error_description, "issued to another client")
}

test_another_clients_token_whose_may_act_names_the_client_is_exchanged if {
	named := object.union(another_clients_token, {"may_act": {"client_id": "billing-service"}})
	d := token_exchange.decision with input as exchange(f.confidential_client, named, {"scopes": ["invoices.read"]})
	d.allow
}

# billing-service exchanges spa's token of alice, with one delegation in the input.
exchange_delegated_by(grant) := object.union(
	exchange(f.confidential_client, another_clients_token, {"scopes": ["invoices.read"]}),
	{"delegations": [grant]},
)

test_another_clients_token_of_a_user_who_delegated_to_the_client_is_exchanged if {
	delegated := exchange_delegated_by(delegation_from("alice", "billing-service"))
	d := token_exchange.decision with input as delegated
	d.allow
}

# A delegation grants what it names: the exchange that rests on it carries no more (found 2026-11-29:
# a delegation of one scope let the client exchange every scope of the user's token).
test_an_exchange_that_rests_on_a_delegation_carries_only_what_it_delegates if {
	held := object.union(another_clients_token, {"scopes": ["invoices.read", "profile"]})
	asked := object.union(
		exchange(f.confidential_client, held, {"scopes": []}),
		{"delegations": [delegation_from("alice", "billing-service")]},
	)
	d := token_exchange.decision with input as asked
	d.allow
	d.scopes == ["invoices.read"]
}

test_an_exchange_that_rests_on_a_delegation_of_other_scopes_is_refused if {
	d := token_exchange.decision with input as exchange_delegated_by(object.union(
		delegation_from("alice", "billing-service"),
		{"scopes": ["view"]},
	))
	not d.allow
}

# A delegation grants scopes on a resource, never authorization details (found 2026-11-29: a
# user's payment details were passed on to a client she had delegated a photo to).
test_an_exchange_that_rests_on_a_delegation_carries_no_authorization_details if {
	payment := [{"type": "payment_initiation", "instructedAmount": {"currency": "EUR", "amount": "5000"}}]
	asked := object.union(
		exchange(f.confidential_client, another_clients_token, {"scopes": [], "authorization_details": payment}),
		{"delegations": [delegation_from("alice", "billing-service")]},
	)
	d := token_exchange.decision with input as asked
	not d.allow
	d.error == "invalid_grant"
	contains(d.error_description, "never authorization_details")
}

test_a_delegation_from_another_user_does_not_count if {
	delegated := exchange_delegated_by(delegation_from("bob", "billing-service"))
	d := token_exchange.decision with input as delegated
	not d.allow
}

test_a_delegation_to_another_client_does_not_count if {
	delegated := exchange_delegated_by(delegation_from("alice", "spa"))
	d := token_exchange.decision with input as delegated
	not d.allow
}

test_an_actor_token_of_another_client_is_refused if {
	d := token_exchange.decision with input as with_actor(access_token, object.union(actor_token, {"client_id": "spa"}))
	not d.allow
	contains(d.error_description, "actor token was issued to another client")
}

# RFC 8693 §2.2.2: a resource or audience the token cannot serve is invalid_target.
invoices_api := {"https://invoices.example/": {"scopes": ["invoices.read", "invoices.write"]}}

for_resource(subject_token, overrides) := exchange(
	f.confidential_client,
	subject_token,
	object.union({"resource": "https://invoices.example/", "scopes": subject_token.scopes}, overrides),
)

test_a_resource_outside_every_held_scope_is_invalid_target if {
	profile_only := object.union(access_token, {"scopes": ["openid", "profile"]})
	asked := for_resource(profile_only, {})
	d := token_exchange.decision with input as asked with data.oauth.resource_types as invoices_api
	not d.allow
	d.error == "invalid_target"
	contains(d.error_description, "https://invoices.example/")
}

test_a_resource_is_served_with_the_held_scopes_within_its_ceiling if {
	asked := for_resource(access_token, {})
	d := token_exchange.decision with input as asked with data.oauth.resource_types as invoices_api
	d.allow
	d.scopes == ["invoices.read"]
}

test_an_id_token_for_a_resource_outside_the_clients_scopes_is_invalid_target if {
	issuers := {"https://idp.example": {"jwks_uri": "https://idp.example/jwks"}}
	types := {"https://mail.example/": {"scopes": ["mail.read"]}}
	asked := exchange(f.confidential_client, id_token, {"resource": "https://mail.example/"})
	d := token_exchange.decision with input as asked
		with data.oauth.trusted_issuers as issuers
		with data.oauth.resource_types as types
	d.error == "invalid_target"
}

test_a_scope_the_client_lacks_for_a_servable_resource_stays_invalid_scope if {
	issuers := {"https://idp.example": {"jwks_uri": "https://idp.example/jwks"}}
	types := {"https://mail.example/": {"scopes": ["mail.read", "invoices.read"]}}
	client := object.union(f.confidential_client, {"scopes": ["invoices.read"]})
	asked := exchange(client, id_token, {"resource": "https://mail.example/", "scopes": ["mail.read"]})
	d := token_exchange.decision with input as asked
		with data.oauth.trusted_issuers as issuers
		with data.oauth.resource_types as types
	d.error == "invalid_scope"
}

test_a_client_token_never_passes_on_openid if {
	client_token := object.union(access_token, {"sub": null})
	asked := object.union(exchange(f.confidential_client, client_token, {}), {"subject": null})
	d := token_exchange.decision with input as asked
	d.allow
	d.scopes == ["invoices.read"]
}

test_withheld_scopes_are_not_passed_on if {
	clients := {"billing-service": {"withheld_scopes": ["openid"]}}
	asked := exchange(f.confidential_client, access_token, {})
	d := token_exchange.decision with input as asked with data.oauth.clients as clients
	d.scopes == ["invoices.read"]
}

# billing-service, entitled to invoices.write for the invoices API alone, re-aims its own token.
entitled_for_invoices := object.union(f.confidential_client, {
	"scopes": ["invoices.read"],
	"granted_resources": [{"type": "https://invoices.example/", "scopes": ["invoices.write"]}],
})

invoices_and_ledger := object.union(
	invoices_api,
	{"https://ledger.example/": {"scopes": ["invoices.write", "ledger.read"]}},
)

# No scope asked for: the protocol code asks for what the token holds.
reaimed_at(resource) := exchange(
	entitled_for_invoices,
	object.union(access_token, {"scopes": ["invoices.read", "invoices.write"], "resource": "https://invoices.example/"}),
	{"resource": resource, "scopes": ["invoices.read", "invoices.write"]},
)

# Found 2026-11-30: the token kept invoices.write for a target the client holds no entitlement
# for, whose type shares the scope name or has no ceiling.
test_an_own_token_carries_no_entitlement_of_another_type if {
	d := token_exchange.decision with input as reaimed_at("https://ledger.example/")
		with data.oauth.resource_types as invoices_and_ledger
	not d.allow
	d.error == "invalid_scope"
}

test_an_own_token_carries_only_its_registered_scopes_to_another_type if {
	ledger := {"https://ledger.example/": {"scopes": ["invoices.read", "invoices.write", "ledger.read"]}}
	d := token_exchange.decision with input as reaimed_at("https://ledger.example/")
		with data.oauth.resource_types as object.union(invoices_api, ledger)
	d.allow
	d.scopes == ["invoices.read"]
}

test_an_own_token_keeps_its_entitlements_for_their_own_type if {
	d := token_exchange.decision with input as reaimed_at("https://invoices.example/")
		with data.oauth.resource_types as invoices_api
	d.allow
	d.scopes == ["invoices.read", "invoices.write"]
}

# A token the client was issued on its user's delegation (scopes it holds by no registration) is
# exchanged again at the delegated resource's server with them.
test_an_own_token_keeps_what_its_user_delegated_to_the_client if {
	delegated_view := object.union(delegation_from("alice", "billing-service"), {"scopes": ["view"]})
	asked := object.union(
		exchange(f.confidential_client, object.union(access_token, {"scopes": ["view"]}), {"scopes": []}),
		{"delegations": [delegated_view]},
	)
	d := token_exchange.decision with input as asked
	d.allow
	d.scopes == ["view"]
}

# A scope the client holds by no entitlement of another type (its token was exchanged from another
# client's on may_act, say) is passed on in a chain of exchanges.
test_an_own_token_keeps_what_it_holds_by_no_entitlement if {
	held := object.union(access_token, {"scopes": ["mail.read"]})
	d := token_exchange.decision with input as exchange(f.confidential_client, held, {"scopes": ["mail.read"]})
	d.allow
	d.scopes == ["mail.read"]
}
