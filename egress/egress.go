// Package egress guards every outgoing connection Adal makes on behalf of a tenant.
//
// A webhook relay lets strangers choose where the server connects to, which makes it a ready-made SSRF
// tool: without a guard a tenant could point a recipient at the cloud metadata service, the database on
// localhost or anything else on the private network. The guard therefore refuses every address that is not
// plainly on the public internet, unless the operator opens private ranges (Policy); the cloud metadata
// services stay closed whatever the policy.
//
// The check runs at dial time, on the IP address the connection is actually about to use (net.Dialer's
// ControlContext hook). Checking the URL or a DNS answer beforehand would not be enough: a hostile DNS
// server can answer a public address to the check and a private one to the dial (DNS rebinding). At dial
// time there is nothing left to re-resolve.
package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// The settings an operator uses to let recipients reach private addresses; refusal messages quote them so
// whoever reads an attempt's error knows how to lift the restriction.
const (
	AllowPrivateEnv = "ADAL_ALLOW_PRIVATE_TARGETS"
	AllowedCIDRsEnv = "ADAL_ALLOWED_TARGET_CIDRS"
)

// ErrForbiddenTarget is matched (errors.Is) by every refusal of the guard, through any wrapping by net and
// net/http, so callers can tell "we refused to connect" apart from "the connection failed".
var ErrForbiddenTarget = errors.New("egress: target address is not allowed")

// ForbiddenTargetError is the refusal for one address. It carries the address and the reason so that the
// message shown on an attempt says exactly what was refused and why.
type ForbiddenTargetError struct {
	// Addr is the refused address as the dialer saw it (an IPv4-mapped or NAT64 form stays as it was).
	Addr netip.Addr
	// Reason names the refused range, e.g. "loopback" or "private network (RFC 1918)".
	Reason string
}

// Error tells a human what was refused and how an operator can allow it.
func (e *ForbiddenTargetError) Error() string {
	if strings.HasPrefix(e.Reason, metadataReason) {
		return fmt.Sprintf("target address %s is not allowed (%s); no setting allows it", e.Addr, e.Reason)
	}
	return fmt.Sprintf("target address %s is not allowed (%s); list its range in %s or set %s=true to allow",
		e.Addr, e.Reason, AllowedCIDRsEnv, AllowPrivateEnv)
}

// Is makes errors.Is(err, ErrForbiddenTarget) true for every refusal.
func (e *ForbiddenTargetError) Is(target error) bool { return target == ErrForbiddenTarget }

type rule struct {
	prefix netip.Prefix
	reason string
}

func rules(pairs ...string) []rule {
	out := make([]rule, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, rule{prefix: netip.MustParsePrefix(pairs[i]), reason: pairs[i+1]})
	}
	return out
}

// ipv4Rules is a deny list: IPv4 has no clean "public" prefix, so every special-purpose block that is not
// reachable on the public internet (IANA IPv4 Special-Purpose Address Registry) is listed. First match wins,
// so narrower entries come before the blocks that contain them.
var ipv4Rules = rules(
	"0.0.0.0/32", "unspecified",
	"0.0.0.0/8", `"this network" (0.0.0.0/8)`,
	"10.0.0.0/8", "private network (RFC 1918)",
	"100.64.0.0/10", "shared address space (carrier-grade NAT, RFC 6598)",
	"127.0.0.0/8", "loopback",
	"169.254.169.254/32", metadataReason,
	"169.254.0.0/16", "link-local",
	"172.16.0.0/12", "private network (RFC 1918)",
	"192.0.0.0/24", "reserved (IETF protocol assignments)",
	"192.0.2.0/24", "documentation (TEST-NET-1)",
	"192.88.99.0/24", "reserved (deprecated 6to4 relay anycast)",
	"192.168.0.0/16", "private network (RFC 1918)",
	"198.18.0.0/15", "benchmarking (RFC 2544)",
	"198.51.100.0/24", "documentation (TEST-NET-2)",
	"203.0.113.0/24", "documentation (TEST-NET-3)",
	"224.0.0.0/4", "multicast",
	"255.255.255.255/32", "broadcast",
	"240.0.0.0/4", "reserved (240.0.0.0/4)",
)

// ipv6GlobalUnicast is the only IPv6 block handed out for public hosts; everything outside it (apart from
// the translation prefixes handled on their own) is refused, which is safer than listing what to refuse.
var ipv6GlobalUnicast = netip.MustParsePrefix("2000::/3")

// ipv6OutsideRules only gives a precise reason for well-known blocks outside 2000::/3; they are refused
// either way.
var ipv6OutsideRules = rules(
	"fc00::/7", "private network (unique local, fc00::/7)",
	"fe80::/10", "link-local",
	"fec0::/10", "reserved (deprecated site-local)",
	"ff00::/8", "multicast",
	"100::/64", "reserved (discard-only)",
	"64:ff9b:1::/48", "local-use NAT64 (64:ff9b:1::/48)",
	"::/96", "reserved (deprecated IPv4-compatible IPv6)",
)

// ipv6InsideRules are the special blocks inside 2000::/3 that are not public hosts.
var ipv6InsideRules = rules(
	"2001::/32", "reserved (Teredo tunnelling)",
	"2001:2::/48", "benchmarking (2001:2::/48)",
	"2001:db8::/32", "documentation (2001:db8::/32)",
	"2001::/23", "reserved (IETF protocol assignments)",
	"3fff::/20", "documentation (3fff::/20)",
)

var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
)

const metadataReason = "link-local (cloud metadata service)"

// metadataAddrs are the cloud providers' instance metadata services, which hand out the host's credentials:
// no policy lets a recipient reach them, however private targets are allowed.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, DigitalOcean, Oracle
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task credentials
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
}

// Policy says which addresses outgoing connections may reach beyond the public internet. The zero Policy
// allows public addresses only.
type Policy struct {
	// AllowPrivate (ADAL_ALLOW_PRIVATE_TARGETS) allows every address but the metadata services: for
	// development and for deployments whose recipients live on the same private network.
	AllowPrivate bool
	// AllowedCIDRs (ADAL_ALLOWED_TARGET_CIDRS) allows these ranges on top of the public internet: the narrow
	// alternative to AllowPrivate. A range never opens a metadata address.
	AllowedCIDRs []netip.Prefix
}

// ParseCIDRs reads a comma-separated list of ranges such as "10.1.0.0/16, fd12::/64" (a bare address is a
// range of one).
func ParseCIDRs(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%q is neither an address nor a CIDR range", f)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR range: %w", f, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Check returns nil when the policy lets addr be connected to, and a *ForbiddenTargetError otherwise.
func (p Policy) Check(addr netip.Addr) error {
	a := addr.WithZone("").Unmap()
	for _, m := range metadataAddrs {
		if a == m || routedTo(a) == m {
			return &ForbiddenTargetError{Addr: addr, Reason: metadataReason}
		}
	}
	if p.AllowPrivate {
		if !addr.IsValid() {
			return &ForbiddenTargetError{Addr: addr, Reason: "invalid address"}
		}
		return nil
	}
	for _, r := range p.AllowedCIDRs {
		if r.Contains(a) {
			return nil
		}
	}
	return Check(addr)
}

// Control is the dial-time hook (net.Dialer.ControlContext) that applies the policy to the address a socket
// is about to connect to. It fails closed: an address it cannot parse is refused.
func (p Policy) Control(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &ForbiddenTargetError{Reason: fmt.Sprintf("unparsable dial address %q", address)}
	}
	return p.Check(ap.Addr())
}

// Check returns nil when addr is plainly on the public internet, and a *ForbiddenTargetError otherwise. It only
// classifies; it never touches the network. Addresses that embed an IPv4 address and are routed to it
// (IPv4-mapped ::ffff:a.b.c.d, NAT64 64:ff9b::a.b.c.d, 6to4 2002:aabb:ccdd::) are judged by the embedded
// address, because that is where the packets end up.
func Check(addr netip.Addr) error {
	if reason := classify(addr); reason != "" {
		return &ForbiddenTargetError{Addr: addr, Reason: reason}
	}
	return nil
}

func classify(addr netip.Addr) string {
	if !addr.IsValid() {
		return "invalid address"
	}
	a := addr.WithZone("")
	if a.Is4() {
		return classify4(a)
	}
	if a.Is4In6() {
		return embedded(classify4(a.Unmap()), "IPv4-mapped")
	}
	switch {
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case nat64WellKnown.Contains(a):
		return embedded(classify4(routedTo(a)), "via NAT64")
	case sixToFour.Contains(a):
		return embedded(classify4(routedTo(a)), "via 6to4")
	}
	if !ipv6GlobalUnicast.Contains(a) {
		if reason := match(ipv6OutsideRules, a); reason != "" {
			return reason
		}
		return "reserved (not IPv6 global unicast)"
	}
	return match(ipv6InsideRules, a)
}

func classify4(a netip.Addr) string { return match(ipv4Rules, a) }

// routedTo is the IPv4 address a NAT64 or 6to4 address is routed to, and a itself otherwise.
func routedTo(a netip.Addr) netip.Addr {
	b := a.As16()
	switch {
	case !a.Is6():
		return a
	case nat64WellKnown.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16]))
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6]))
	}
	return a
}

func embedded(reason, how string) string {
	if reason == "" {
		return ""
	}
	return reason + ", " + how
}

func match(rs []rule, a netip.Addr) string {
	for _, r := range rs {
		if r.prefix.Contains(a) {
			return r.reason
		}
	}
	return ""
}

// Dial-phase limits: generous enough for slow but healthy recipients, short enough that a black-holed
// address gives up well before the attempt's own deadline would.
const (
	dialTimeout         = 10 * time.Second
	keepAlive           = 30 * time.Second
	tlsHandshakeTimeout = 10 * time.Second
)

// NewDialer returns a dialer that refuses, at connect time, the addresses the policy forbids.
func NewDialer(p Policy) *net.Dialer {
	return &net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive, ControlContext: p.Control}
}

// NewTransport returns the http.Transport every outgoing delivery uses: guarded dialer, no proxy taken from
// the environment (a proxy would connect on our behalf and bypass the guard), HTTP/1.1 and HTTP/2, no
// transparent decompression (bodies are discarded anyway), and connection pools sized for a relay that
// talks to the same recipients over and over.
//
// inFlight is how many attempts may run at once (the scheduler's workers): one recipient may keep that many
// idle connections. A smaller pool would close, after each burst to one recipient, the connections it cannot
// keep, and dial them again moments later: under load, a long tail of delivery latency.
func NewTransport(p Policy, inFlight int) *http.Transport {
	perHost := max(inFlight, 64)
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            NewDialer(p).DialContext,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    tlsHandshakeTimeout,
		ExpectContinueTimeout:  time.Second,
		IdleConnTimeout:        90 * time.Second,
		MaxIdleConns:           max(1024, perHost),
		MaxIdleConnsPerHost:    perHost,
		MaxResponseHeaderBytes: 1 << 20,
		DisableCompression:     true,
	}
}
