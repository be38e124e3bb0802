package arbiter.introspect

import data.arbiter.lib

# METADATA
# title: POST /introspect
# description: |
#   Re-evaluated on every call. The caller is a resource server: a bearer token with scope
#   introspection or uma_protection, or a client registered as a resource server's introspection
#   client, or a client entitled to urn:as:introspect. A caller that is a registered resource
#   server's introspection client is shown only the tokens issued for one of its resources, or
#   for none in particular (RFC 7662 §4).
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
} else := lib.deny("access_denied", "the token was not issued for this resource server") if {
	caller_entitled
	not meant_for_caller
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

# RFC 7662 §4: a resource server must not learn about tokens meant for another. A caller that
# introspects for no resource server (a client entitled to urn:as:introspect, a bearer token of
# a client that is none) is trusted with every token, and a token issued for no resource is
# meant for none in particular, so any resource server may be shown it.
meant_for_caller if count(caller_resources) == 0

meant_for_caller if count(token_audiences) == 0

meant_for_caller if {
	some audience in token_audiences
	audience in caller_resources
}

# The resource indicators of the resource servers the caller introspects for (inputs recorded
# before `resource_indicators` existed name one, in `resource_server`).
caller_resources contains indicator if some indicator in input.caller.resource_indicators

caller_resources contains input.caller.resource_server.resource_indicator if is_object(input.caller.resource_server)

# The resources the token was issued for (inputs recorded before `audiences` existed name one, in `resource`).
token_audiences := input.token.audiences if is_array(input.token.audiences)

else := [input.token.resource] if is_string(input.token.resource)

else := []
