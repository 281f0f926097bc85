package broker_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/delivery"
)

// testCA is a certificate authority of the test's own, which no system trusts.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "adal test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// serverFiles writes a certificate for 127.0.0.1 signed by ca, and its key, for a broker to serve.
func (ca testCA) serverFiles(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}

// TestMQTTOverTLSTrustsTheGivenAuthority publishes over mqtts:// to a broker whose certificate only the
// recipient's caCertificate vouches for: without it the attempt fails as TLS, with it the message arrives.
func TestMQTTOverTLSTrustsTheGivenAuthority(t *testing.T) {
	ca := newTestCA(t)
	certFile, keyFile := ca.serverFiles(t)
	// Started as root, Mosquitto reads its files as the user it switches to: staying root, it can read the
	// test's private files (the line means nothing to a broker not started as root).
	b := startMosquitto(t, "user root", "allow_anonymous true", "certfile "+certFile, "keyfile "+keyFile)
	topic := mqttTestTopic()
	p := brokerTestPublisher(t)

	out := mqttOutgoing("mqtts://"+b.addr(), topic, "untrusted", []byte("{}"))
	o := p.Send(t.Context(), out)
	require.Equal(t, delivery.ErrTLS, o.ErrorKind, "outcome: %+v", o)
	require.Contains(t, o.ErrorMessage, "TLS handshake with 127.0.0.1")

	out = mqttOutgoing("mqtts://"+b.addr(), topic, "trusted", []byte(`{"ok":true}`))
	out.Destination.Settings.CACertificate = string(ca.pem)
	o = p.Send(t.Context(), out)
	require.True(t, o.Succeeded(), "outcome: %+v", o)
	require.Contains(t, o.Answer, "PUBACK")
}
