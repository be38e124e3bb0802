package arbiter.ssf

import data.arbiter.lib

# METADATA
# title: Shared Signals streams (/ssf/…)
# description: |
#   A receiver (a client of the tenant holding ssf.manage or ssf.read, which protocol code has
#   checked) manages and reads its own streams only; public clients cannot own a stream, since
#   nothing would tie the stream to one receiver.
# scope: document
# entrypoint: true
default decision := {
	"allow": false,
	"error": "access_denied",
	"error_description": "no policy allows this stream operation",
}

ssf := input.ssf

decision := lib.deny("access_denied", "a stream is managed by the receiver that owns it") if {
	ssf.stream.owner_client_id != input.client.client_id
} else := lib.deny("unauthorized_client", "a public client cannot own a Shared Signals stream") if {
	input.client.client_type == "public"
} else := {"allow": true}
