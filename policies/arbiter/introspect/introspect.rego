package arbiter.introspect

import data.arbiter.lib

# METADATA
# title: POST /introspect
# description: |
#   Re-evaluated on every call. The caller is a resource server: a bearer token with scope
#   introspection or uma_protection, or a client registered as a resource server's introspection
#   client, or a client entitled to urn:as:introspect.
# scope: document
# entrypoint: true
default decision := {
	"allow": false,
	"error": "access_denied",
	"error_description": "the caller may not introspect tokens",
}

decision := lib.deny("invalid_token", "the token is not active") if {
	caller_entitled
	not input.token.active
} else := {"allow": true, "scopes": input.token.scopes} if {
	caller_entitled
}

caller_entitled if {
	some scope in input.caller.scopes
	scope in {"introspection", "uma_protection"}
}

caller_entitled if {
	input.caller.method != "bearer"
	is_object(input.caller.resource_server)
}

caller_entitled if {
	input.caller.method != "bearer"
	some granted in input.client.granted_resources
	granted.type == "urn:as:introspect"
}
