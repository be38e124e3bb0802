package arbiter.uma_permission_test

import data.arbiter.fixtures_test as f
import data.arbiter.uma_permission

permission(subject, resource, scopes) := object.union(
	f.input_with(f.confidential_client, subject, {"endpoint": "/permission"}),
	{"permission": {"operation": "ticket", "resource_id": "r1", "resource_scopes": scopes, "resource": resource}},
)

test_permission_on_owned_resource_within_scopes if {
	d := uma_permission.decision with input as permission(f.alice, f.photo, ["view"])
	d.allow
	d.scopes == ["view"]
}

test_permission_with_foreign_scope_is_invalid_scope if {
	d := uma_permission.decision with input as permission(f.alice, f.photo, ["delete"])
	d.error == "invalid_scope"
}

test_permission_on_unknown_resource if {
	d := uma_permission.decision with input as permission(f.alice, null, ["view"])
	d.error == "invalid_resource_id"
}

test_permission_on_resource_of_another_owner if {
	d := uma_permission.decision with input as permission({"sub": "mallory"}, f.photo, ["view"])
	not d.allow
}

test_client_pat_owns_client_resources if {
	owned := object.union(f.photo, {"owner": {"sub": null, "client_id": "billing-service"}})
	uma_permission.decision.allow with input as permission(null, owned, ["view"])
}

redeeming(subject, client, scopes, delegations) := object.union(
	f.input_with(client, subject, {"endpoint": "/token", "grant_type": "urn:ietf:params:oauth:grant-type:uma-ticket"}),
	{
		"permission": {"operation": "rpt", "resource_id": "r1", "resource_scopes": scopes, "resource": f.photo},
		"delegations": delegations,
	},
)

to_bob(scopes) := {
	"delegation_id": "d1", "grantee_type": "subject", "grantee_subject_id": "bob", "grantee_client_id": null,
	"resource_id": "r1", "scopes": scopes, "expires_at": null, "owner": {"sub": "alice", "client_id": null},
}

test_rpt_for_the_owner_grants_what_was_asked if {
	d := uma_permission.decision with input as redeeming(f.alice, f.confidential_client, ["view", "print"], [])
	d.allow
	d.scopes == ["print", "view"]
}

test_rpt_for_a_stranger_is_request_denied if {
	d := uma_permission.decision with input as redeeming({"sub": "bob"}, f.confidential_client, ["view"], [])
	d.error == "request_denied"
}

test_rpt_within_a_delegation if {
	asked := redeeming({"sub": "bob"}, f.confidential_client, ["view", "print"], [to_bob(["view"])])
	d := uma_permission.decision with input as asked
	d.allow
	d.scopes == ["view"]
}

test_rpt_ignores_a_delegation_to_someone_else if {
	asked := redeeming({"sub": "carol"}, f.confidential_client, ["view"], [to_bob(["view"])])
	d := uma_permission.decision with input as asked
	not d.allow
}

test_rpt_without_a_requesting_party_needs_info if {
	d := uma_permission.decision with input as redeeming(null, f.confidential_client, ["view"], [])
	d.error == "need_info"
	count(d.extensions.required_claims) == 1
}

test_rpt_for_a_client_grantee if {
	to_client := object.union(to_bob(["print"]), {
		"grantee_type": "client",
		"grantee_subject_id": null,
		"grantee_client_id": "billing-service",
	})
	d := uma_permission.decision with input as redeeming(null, f.confidential_client, ["print"], [to_client])
	d.allow
	d.scopes == ["print"]
}
