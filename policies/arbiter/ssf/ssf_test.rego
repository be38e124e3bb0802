package arbiter.ssf_test

import data.arbiter.fixtures_test as f
import data.arbiter.ssf

streaming(client, operation, owner) := object.union(
	f.input_with(client, null, {"endpoint": "/ssf/streams"}),
	{"ssf": {
		"operation": operation,
		"stream": {
			"stream_id": "s1",
			"owner_client_id": owner,
			"delivery_method": "urn:ietf:rfc:8935",
			"endpoint_url": "https://receiver.example/events",
			"events_requested": ["https://schemas.openid.net/secevent/caep/event-type/session-revoked"],
			"default_subjects": "NONE",
			"status": "enabled",
		},
		"subject": null,
	}},
)

test_owner_creates_its_stream if {
	ssf.decision.allow with input as streaming(f.confidential_client, "create", f.confidential_client.client_id)
}

test_owner_reads_and_polls_its_stream if {
	ssf.decision.allow with input as streaming(f.confidential_client, "read", f.confidential_client.client_id)
	ssf.decision.allow with input as streaming(f.confidential_client, "poll", f.confidential_client.client_id)
}

test_another_clients_stream_is_refused if {
	d := ssf.decision with input as streaming(f.confidential_client, "delete", "someone-else")
	not d.allow
	d.error == "access_denied"
}

test_public_client_owns_no_stream if {
	d := ssf.decision with input as streaming(f.public_client, "create", f.public_client.client_id)
	d.error == "unauthorized_client"
}
