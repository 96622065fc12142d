package profiles

// The front door: every request's way in is logged once, at its start,
// as a VCL_Log record DoorLog + one of the door words, which the daemon
// counts (status front_door). The words are the status's field names.
const (
	DoorLog = "gearshift-door: "

	// DoorDirect: from a peer that is not a trusted proxy; the peer is
	// the visitor.
	DoorDirect = "direct"
	// DoorProxyProtocol: through a PROXY protocol listener (client.ip
	// differs from remote.ip): the terminator told the visitor's address.
	DoorProxyProtocol = "proxy_protocol"
	// DoorForwarded: from a trusted proxy that named the visitor in
	// X-Forwarded-For.
	DoorForwarded = "forwarded"
	// DoorUnidentified: from a trusted proxy with neither PROXY nor
	// X-Forwarded-For: a local tool, or a terminator that tells nothing
	// (every visitor behind it would pass as trusted).
	DoorUnidentified = "unidentified"
)

// Doors are the door words, in the order status lists them.
var Doors = [...]string{DoorDirect, DoorProxyProtocol, DoorForwarded, DoorUnidentified}

// doorWords are DoorLog and the door words, as the templates see them.
type doorWords struct {
	Log, Direct, ProxyProtocol, Forwarded, Unidentified string
}
