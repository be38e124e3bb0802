# The helpers alone: each depends only on its arguments.
package arbiter.lib_test

import data.arbiter.fixtures_test as f
import data.arbiter.lib

types := {
	"urn:as:introspect": {"scopes": ["introspection", "uma_protection"]},
	"urn:payments": {"obligations": {"step_up": true}, "jit_single_use": true},
}

test_target_type_is_the_resolved_type_of_a_resource_that_names_none if {
	resolved := f.request({"resolved_resource_type": "urn:payments", "resource": "https://pay.example"})
	lib.target_type(resolved, types) == "urn:payments"
}

# A caller's resource_type hint (the resolved type of a resource nobody registered) never replaces
# the type the resource names, nor drops its ceiling and obligations by naming a type of none.
test_target_type_of_a_resource_that_names_one_is_that_type_whatever_was_resolved if {
	hinted := f.request({"resolved_resource_type": "urn:nope", "resource": "urn:payments"})
	lib.target_type(hinted, types) == "urn:payments"
	other := f.request({"resolved_resource_type": "urn:payments", "resource": "urn:as:introspect"})
	lib.target_type(other, types) == "urn:as:introspect"
}

test_target_type_of_a_resource_that_names_a_type if {
	lib.target_type(f.request({"resource": "urn:as:introspect"}), types) == "urn:as:introspect"
}

test_target_type_is_null_without_one if {
	lib.target_type(f.request({"resource": "https://api.example"}), types) == null
}

test_client_allowed_scopes_add_entitlements_within_the_ceiling if {
	allowed := lib.client_allowed_scopes(f.confidential_client, "urn:as:introspect", types)
	allowed == {"introspection"}
}

test_client_allowed_scopes_without_a_ceiling if {
	allowed := lib.client_allowed_scopes(f.confidential_client, null, types)
	allowed == {"invoices.read", "invoices.write"}
}

test_scopes_granted_falls_back_when_nothing_is_requested if {
	lib.scopes_granted(set(), {"a"}, {"fallback"}) == {"fallback"}
	lib.scopes_granted({"a", "b"}, {"a"}, {"fallback"}) == {"a"}
}

test_allow_with_relays_the_target_type_outputs if {
	decision := lib.allow_with({"b", "a"}, f.request({"resolved_resource_type": "urn:payments"}), types)
	decision == {
		"allow": true,
		"scopes": ["a", "b"],
		"authorization_details": [],
		"obligations": {"step_up": true},
		"jit_single_use": true,
	}
}

test_owns_by_user_or_by_client if {
	lib.owns(f.photo, f.alice, f.confidential_client)
	not lib.owns(f.photo, {"sub": "bob"}, f.confidential_client)
	lib.owns({"owner": {"sub": null, "client_id": "billing-service"}}, null, f.confidential_client)
}

test_unknown_detail_types if {
	lib.unknown_detail_types([{"type": "urn:payments"}, {"type": "urn:x"}], types, {"urn:rar": {}}) == {"urn:x"}
	lib.unknown_detail_types([{"type": "urn:rar"}], types, {"urn:rar": {}}) == set()
}

test_trusted_issuer_for_a_use if {
	issuers := {"https://idp.example": {"uses": ["token_exchange"]}, "https://any.example": {}}
	lib.trusted_issuer("https://idp.example", "token_exchange", issuers)
	not lib.trusted_issuer("https://idp.example", "software_statement", issuers)
	lib.trusted_issuer("https://any.example", "software_statement", issuers)
}

test_scopes_for_subject_keep_openid_for_a_user_only if {
	lib.scopes_for_subject({"openid", "read"}, {"sub": "alice"}) == {"openid", "read"}
	lib.scopes_for_subject({"openid", "read"}, null) == {"read"}
	lib.scopes_for_subject({"openid", "read"}, {"sub": null}) == {"read"}
}

test_withheld_scopes_are_the_clients_own if {
	clients := {"billing-service": {"withheld_scopes": ["invoices.write"]}, "other": {"withheld_scopes": ["x"]}}
	lib.withheld_scopes(f.confidential_client, clients) == {"invoices.write"}
	lib.withheld_scopes(f.public_client, clients) == set()
	lib.withheld_scopes(null, clients) == set()
}
