package arbiter.delegation_test

import data.arbiter.delegation
import data.arbiter.fixtures_test as f

delegating(operation, scopes, expires_at) := object.union(
	f.input_with(f.confidential_client, f.alice, {"endpoint": "/delegation"}),
	{"delegation": {
		"operation": operation,
		"grantee_type": "subject",
		"grantee_subject_id": "bob",
		"resource_id": "r1",
		"scopes": scopes,
		"expires_at": expires_at,
		"resource": f.photo,
	}},
)

test_owner_delegates_subset_until_future_date if {
	d := delegation.decision with input as delegating("create", ["view"], "2027-01-01T00:00:00Z")
	d.allow
	d.scopes == ["view"]
}

test_delegating_foreign_scope_is_refused if {
	d := delegation.decision with input as delegating("create", ["delete"], null)
	d.error == "invalid_scope"
}

test_expiry_in_the_past_is_refused if {
	d := delegation.decision with input as delegating("update", ["view"], "2025-01-01T00:00:00Z")
	d.error == "invalid_request"
}

test_only_the_owner_delegates if {
	request_input := object.union(delegating("create", ["view"], null), {"subject": {"sub": "mallory"}})
	not delegation.decision.allow with input as request_input
}

test_owner_may_revoke if {
	delegation.decision.allow with input as delegating("revoke", [], null)
}

test_revoke_allowed_once_the_resource_is_gone if {
	revoking := delegating("revoke", ["view"], null)
	gone := object.union(revoking, {"delegation": object.union(revoking.delegation, {"resource": null})})
	delegation.decision.allow with input as gone
}

test_expiry_before_1677_is_refused if {
	d := delegation.decision with input as delegating("create", ["view"], "1600-01-01T00:00:00Z")
	d.error == "invalid_request"
}
