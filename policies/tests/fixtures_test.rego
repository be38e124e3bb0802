# Inputs shared by the pack's unit tests (run: scripts/opa-test.sh).
package arbiter.fixtures_test

request(overrides) := object.union(
	{
		"endpoint": "/token",
		"method": "POST",
		"parameters": {},
		"grant_type": null,
		"scopes": [],
		"resource": null,
		"resolved_resource_type": null,
		"resource_types": [],
		"authorization_details": [],
	},
	overrides,
)

confidential_client := {
	"client_id": "billing-service",
	"client_type": "confidential",
	"registration_type": "admin",
	"scopes": ["invoices.read", "invoices.write"],
	"granted_resources": [{"type": "urn:as:introspect", "scopes": ["introspection"]}],
}

public_client := object.union(confidential_client, {"client_id": "spa", "client_type": "public"})

alice := {"sub": "alice", "idp": "corp", "claims": {"name": "Alice"}}

input_with(client, subject, request_overrides) := {
	"tenant": "_default",
	"client": client,
	"subject": subject,
	"request": request(request_overrides),
	"time": "2026-01-01T12:00:00Z",
}
