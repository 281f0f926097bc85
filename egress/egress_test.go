package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/egress"
)

// TestCheck classifies addresses only; nothing here dials.
func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr   string
		reason string // "" = allowed
	}{
		// Public IPv4.
		{"1.1.1.1", ""},
		{"8.8.8.8", ""},
		{"93.184.216.34", ""},
		{"100.63.255.255", ""}, // just below CGNAT
		{"100.128.0.0", ""},    // just above CGNAT
		{"172.15.255.255", ""}, // just below 172.16/12
		{"172.32.0.0", ""},     // just above 172.16/12
		{"192.0.1.1", ""},
		{"192.169.0.1", ""},
		{"198.20.0.1", ""},
		{"223.255.255.255", ""},
		{"11.0.0.1", ""},
		{"126.255.255.255", ""},
		{"128.0.0.1", ""},
		// Loopback.
		{"127.0.0.1", "loopback"},
		{"127.1.2.3", "loopback"},
		{"127.255.255.255", "loopback"},
		{"::1", "loopback"},
		// RFC 1918.
		{"10.0.0.1", "private network (RFC 1918)"},
		{"10.255.255.255", "private network (RFC 1918)"},
		{"172.16.0.1", "private network (RFC 1918)"},
		{"172.31.255.255", "private network (RFC 1918)"},
		{"192.168.0.1", "private network (RFC 1918)"},
		{"192.168.255.255", "private network (RFC 1918)"},
		// Link-local and the metadata service.
		{"169.254.169.254", "link-local (cloud metadata service)"},
		{"169.254.0.1", "link-local"},
		{"169.254.255.255", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"febf:ffff::1", "link-local"},
		// Unspecified and "this network".
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", `"this network" (0.0.0.0/8)`},
		{"::", "unspecified"},
		// CGNAT (also where Alibaba's metadata service lives).
		{"100.64.0.1", "shared address space (carrier-grade NAT, RFC 6598)"},
		{"100.100.100.200", "shared address space (carrier-grade NAT, RFC 6598)"},
		{"100.127.255.255", "shared address space (carrier-grade NAT, RFC 6598)"},
		// Multicast, broadcast, reserved.
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"255.255.255.255", "broadcast"},
		{"240.0.0.1", "reserved (240.0.0.0/4)"},
		{"255.255.255.254", "reserved (240.0.0.0/4)"},
		{"ff02::1", "multicast"},
		{"ff0e::1", "multicast"},
		// Documentation, benchmarking, protocol assignments.
		{"192.0.2.1", "documentation (TEST-NET-1)"},
		{"198.51.100.7", "documentation (TEST-NET-2)"},
		{"203.0.113.9", "documentation (TEST-NET-3)"},
		{"198.18.0.1", "benchmarking (RFC 2544)"},
		{"198.19.255.255", "benchmarking (RFC 2544)"},
		{"192.0.0.8", "reserved (IETF protocol assignments)"},
		{"192.88.99.1", "reserved (deprecated 6to4 relay anycast)"},
		{"2001:db8::1", "documentation (2001:db8::/32)"},
		{"3fff::1", "documentation (3fff::/20)"},
		{"2001:2::1", "benchmarking (2001:2::/48)"},
		{"2001::1", "reserved (Teredo tunnelling)"},
		{"2001:100::1", "reserved (IETF protocol assignments)"},
		// IPv6 private and other non-global blocks.
		{"fc00::1", "private network (unique local, fc00::/7)"},
		{"fd00::1", "private network (unique local, fc00::/7)"},
		{"fd00:ec2::254", "private network (unique local, fc00::/7)"}, // AWS IPv6 metadata
		{"fec0::1", "reserved (deprecated site-local)"},
		{"100::1", "reserved (discard-only)"},
		{"::1.2.3.4", "reserved (deprecated IPv4-compatible IPv6)"},
		{"5f00::1", "reserved (not IPv6 global unicast)"},
		{"4000::1", "reserved (not IPv6 global unicast)"},
		// Public IPv6.
		{"2606:4700:4700::1111", ""},
		{"2001:4860:4860::8888", ""},
		{"2a00:1450::1", ""},
		// IPv4-mapped IPv6: judged by the embedded address.
		{"::ffff:127.0.0.1", "loopback, IPv4-mapped"},
		{"::ffff:10.1.2.3", "private network (RFC 1918), IPv4-mapped"},
		{"::ffff:169.254.169.254", "link-local (cloud metadata service), IPv4-mapped"},
		{"::ffff:0.0.0.0", "unspecified, IPv4-mapped"},
		{"::ffff:7f00:1", "loopback, IPv4-mapped"},
		{"::ffff:8.8.8.8", ""},
		// NAT64 well-known prefix: judged by the embedded address.
		{"64:ff9b::127.0.0.1", "loopback, via NAT64"},
		{"64:ff9b::7f00:1", "loopback, via NAT64"},
		{"64:ff9b::a9fe:a9fe", "link-local (cloud metadata service), via NAT64"},
		{"64:ff9b::192.168.1.1", "private network (RFC 1918), via NAT64"},
		{"64:ff9b::8.8.8.8", ""},
		// Local-use NAT64 is a private translator: refused outright.
		{"64:ff9b:1::1.2.3.4", "local-use NAT64 (64:ff9b:1::/48)"},
		{"64:ff9b:1::8.8.8.8", "local-use NAT64 (64:ff9b:1::/48)"},
		// 6to4: judged by the embedded address.
		{"2002:7f00:1::1", "loopback, via 6to4"},
		{"2002:a00:1::1", "private network (RFC 1918), via 6to4"},
		{"2002:808:808::1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			t.Parallel()
			addr := netip.MustParseAddr(tt.addr)
			err := egress.Check(addr)
			if tt.reason == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, egress.ErrForbiddenTarget)
			var fe *egress.ForbiddenTargetError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tt.reason, fe.Reason)
			require.Equal(t, addr, fe.Addr)
			require.Contains(t, err.Error(), "target address "+addr.String()+" is not allowed ("+tt.reason+")")
			if strings.Contains(tt.reason, "metadata") {
				require.Contains(t, err.Error(), "; no setting allows it")
			} else {
				require.Contains(t, err.Error(), "set ADAL_ALLOW_PRIVATE_TARGETS=true to allow")
			}
		})
	}
}

func TestCheckInvalidAddress(t *testing.T) {
	t.Parallel()
	require.ErrorIs(t, egress.Check(netip.Addr{}), egress.ErrForbiddenTarget)
}

// TestControl exercises the dial hook with the address strings the dialer hands it, still without dialing.
func TestControl(t *testing.T) {
	t.Parallel()
	tests := []struct {
		address string
		allowed bool
	}{
		{"127.0.0.1:80", false},
		{"[::1]:443", false},
		{"[fe80::1%eth0]:80", false},
		{"[::ffff:127.0.0.1]:80", false},
		{"[64:ff9b::7f00:1]:80", false},
		{"8.8.8.8:53", true},
		{"[2001:4860:4860::8888]:443", true},
		{"not-an-address", false},
		{"example.com:80", false}, // the dialer only ever hands over resolved IPs; a name fails closed
	}
	for _, tt := range tests {
		t.Run(tt.address, func(t *testing.T) {
			t.Parallel()
			err := egress.Policy{}.Control(context.Background(), "tcp", tt.address, nil)
			if tt.allowed {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, egress.ErrForbiddenTarget)
			}
		})
	}
}

func TestDialerRefusesLoopbackUnlessAllowed(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()

	conn, err := egress.NewDialer(egress.Policy{}).DialContext(t.Context(), "tcp", addr)
	require.ErrorIs(t, err, egress.ErrForbiddenTarget)
	require.Nil(t, conn)
	require.Contains(t, err.Error(), "target address 127.0.0.1 is not allowed (loopback)")

	conn, err = egress.NewDialer(egress.Policy{AllowPrivate: true}).DialContext(t.Context(), "tcp", addr)
	require.NoError(t, err)
	require.NoError(t, conn.Close())
}

func TestTransportRefusesLoopbackUnlessAllowed(t *testing.T) {
	t.Parallel()
	for _, network := range []string{"tcp4", "tcp6"} {
		t.Run(network, func(t *testing.T) {
			t.Parallel()
			host := "127.0.0.1"
			if network == "tcp6" {
				host = "[::1]"
			}
			ln, err := net.Listen(network, host+":0")
			if err != nil {
				t.Skipf("no %s loopback here: %v", network, err)
			}
			hits := make(chan struct{}, 10)
			srv := &httptest.Server{
				Listener: ln,
				Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					hits <- struct{}{}
					_, _ = io.WriteString(w, "ok")
				})},
			}
			srv.Start()
			t.Cleanup(srv.Close)

			get := func(allowPrivate bool) (*http.Response, error) {
				tr := egress.NewTransport(egress.Policy{AllowPrivate: allowPrivate}, 0)
				t.Cleanup(tr.CloseIdleConnections)
				req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
				require.NoError(t, err)
				return (&http.Client{Transport: tr}).Do(req)
			}

			resp, err := get(false)
			if resp != nil {
				_ = resp.Body.Close()
			}
			require.ErrorIs(t, err, egress.ErrForbiddenTarget)
			require.Len(t, hits, 0, "the refused request must not reach the server")

			resp, err = get(true)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "ok", string(body))
			require.Len(t, hits, 1)
		})
	}
}

// TestPolicy: private targets can be opened wholesale or by range, and the metadata services by neither, in
// any of the forms that reach them.
func TestPolicy(t *testing.T) {
	t.Parallel()
	private := egress.Policy{AllowPrivate: true}
	ranges := egress.Policy{AllowedCIDRs: []netip.Prefix{
		netip.MustParsePrefix("10.1.0.0/16"),
		netip.MustParsePrefix("169.254.0.0/16"),
		netip.MustParsePrefix("fd12:3456::/32"),
	}}
	for _, tt := range []struct {
		policy           egress.Policy
		allowed, refused []string
	}{
		{egress.Policy{}, []string{"8.8.8.8"}, []string{"10.1.2.3"}},
		{private, []string{"10.1.2.3", "127.0.0.1", "::1", "8.8.8.8", "169.254.1.1"}, []string{
			"169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254", "::ffff:169.254.169.254",
			"64:ff9b::a9fe:a9fe", // NAT64 to 169.254.169.254
			"2002:a9fe:a9fe::1",  // 6to4 to 169.254.169.254
		}},
		{ranges, []string{"10.1.2.3", "::ffff:10.1.2.3", "169.254.1.1", "fd12:3456::1", "8.8.8.8"}, []string{
			"10.2.0.1", "127.0.0.1",
			"169.254.169.254", // inside a listed range, still refused
			"fd12:3457::1",
		}},
	} {
		for _, addr := range tt.allowed {
			assert.NoError(t, tt.policy.Check(netip.MustParseAddr(addr)), "%+v %s", tt.policy, addr)
		}
		for _, addr := range tt.refused {
			assert.ErrorIs(t, tt.policy.Check(netip.MustParseAddr(addr)), egress.ErrForbiddenTarget, "%+v %s", tt.policy, addr)
		}
	}
	err := private.Check(netip.MustParseAddr("169.254.169.254"))
	require.EqualError(t, err, "target address 169.254.169.254 is not allowed (link-local (cloud metadata service)); no setting allows it")
	err = ranges.Check(netip.MustParseAddr("10.2.0.1"))
	require.EqualError(t, err, "target address 10.2.0.1 is not allowed (private network (RFC 1918)); "+
		"list its range in ADAL_ALLOWED_TARGET_CIDRS or set ADAL_ALLOW_PRIVATE_TARGETS=true to allow")
}

func TestParseCIDRs(t *testing.T) {
	t.Parallel()
	got, err := egress.ParseCIDRs(" 10.1.2.0/24, 192.168.1.7 ,fd12::/64,,10.9.9.9/8")
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("10.1.2.0/24"),
		netip.MustParsePrefix("192.168.1.7/32"),
		netip.MustParsePrefix("fd12::/64"),
		netip.MustParsePrefix("10.0.0.0/8"),
	}, got)
	got, err = egress.ParseCIDRs("")
	require.NoError(t, err)
	require.Empty(t, got)
	_, err = egress.ParseCIDRs("10.0.0.0/8, intranet")
	require.EqualError(t, err, `"intranet" is neither an address nor a CIDR range`)
	_, err = egress.ParseCIDRs("10.0.0.0/33")
	require.ErrorContains(t, err, `"10.0.0.0/33" is not a CIDR range`)
}

// TestDialerAllowsListedRangesOnly dials real loopback listeners: a listed range connects, the same host
// outside the listed range does not.
func TestDialerAllowsListedRangesOnly(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()

	listed := egress.Policy{AllowedCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	conn, err := egress.NewDialer(listed).DialContext(t.Context(), "tcp", addr)
	require.NoError(t, err)
	require.NoError(t, conn.Close())

	other := egress.Policy{AllowedCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}
	conn, err = egress.NewDialer(other).DialContext(t.Context(), "tcp", addr)
	require.ErrorIs(t, err, egress.ErrForbiddenTarget)
	require.Nil(t, conn)
}

func TestForbiddenTargetErrorWrapped(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("dial: %w", egress.Check(netip.MustParseAddr("10.0.0.1")))
	require.True(t, errors.Is(err, egress.ErrForbiddenTarget))
	require.False(t, errors.Is(errors.New("other"), egress.ErrForbiddenTarget))
}

// TestTransportKeepsAConnectionPerAttemptInFlight: after a burst of as many concurrent attempts to one
// recipient as may be in flight, the next burst reuses every connection; none is closed and dialled again.
func TestTransportKeepsAConnectionPerAttemptInFlight(t *testing.T) {
	t.Parallel()
	const inFlight = 100 // far more than net/http keeps idle per host by default
	var dials atomic.Int64
	var arrived sync.WaitGroup
	release := make(chan struct{}, inFlight) // buffered: releasing never waits on an attempt that failed
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		<-release // hold every attempt of the burst, so each needs a connection of its own
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	client := &http.Client{Transport: egress.NewTransport(egress.Policy{AllowPrivate: true}, inFlight)}
	defer client.CloseIdleConnections()
	burst := func() {
		arrived.Add(inFlight)
		var done sync.WaitGroup
		for range inFlight {
			done.Go(func() {
				resp, err := client.Get(srv.URL)
				if !assert.NoError(t, err) {
					arrived.Done() // never reached the server: do not wait for it there
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			})
		}
		arrived.Wait()
		for range inFlight { // let every held attempt finish
			release <- struct{}{}
		}
		done.Wait()
	}
	burst()
	require.Equal(t, int64(inFlight), dials.Load())
	burst()
	require.Equal(t, int64(inFlight), dials.Load(), "the second burst reuses the first one's connections")
}
