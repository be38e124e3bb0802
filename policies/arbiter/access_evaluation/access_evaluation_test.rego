package arbiter.access_evaluation_test

import data.arbiter.access_evaluation
import data.arbiter.fixtures_test as f

evaluation(subject_id, owner) := object.union(
	f.input_with(f.confidential_client, null, {"endpoint": "/access/v1/evaluation"}),
	{"evaluation": {
		"subject": {"type": "user", "id": subject_id},
		"action": {"name": "read"},
		"resource": {"type": "document", "id": "d1", "properties": {"owner": owner}},
	}},
)

test_owner_may_act_on_own_resource if {
	access_evaluation.decision.allow with input as evaluation("alice", "alice")
}

test_others_may_not if {
	not access_evaluation.decision.allow with input as evaluation("bob", "alice")
}
