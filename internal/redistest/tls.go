package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are a throwaway certificate authority and two certificates it signed, as PEM files in
// a test's temporary directory: a server's, valid for 127.0.0.1, ::1 and localhost (and usable
// as a client's, as a cluster node's connections to its peers need), and a client's.
type Certs struct {
	CA         string // the authority's certificate
	ServerCert string
	ServerKey  string
	ClientCert string
	ClientKey  string
	pool       *x509.CertPool
	client     tls.Certificate
}

// NewCerts makes a new authority and its certificates in a temporary directory of t. Nothing
// outside the test trusts the authority: its key lives only in memory.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	c, err := newCerts(t.TempDir())
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return c
}

func newCerts(dir string) (*Certs, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	c := &Certs{
		CA:         filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client.key"),
		pool: x509.NewCertPool(),
	}
	c.pool.AddCert(ca)
	if err := writePEM(c.CA, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	leaf := func(serial int64, name string, usage []x509.ExtKeyUsage, certFile, keyFile string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  usage,
			DNSNames:     []string{"localhost"},
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(keyFile, "EC PRIVATE KEY", kb)
	}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if err := leaf(2, "redistest server", both, c.ServerCert, c.ServerKey); err != nil {
		return nil, err
	}
	if err := leaf(3, "redistest client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, c.ClientCert, c.ClientKey); err != nil {
		return nil, err
	}
	if c.client, err = tls.LoadX509KeyPair(c.ClientCert, c.ClientKey); err != nil {
		return nil, err
	}
	return c, nil
}

func writePEM(path, kind string, der []byte) error {
	b := pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ClientConfig is a TLS configuration that trusts only c's authority and presents c's client
// certificate, for a connection to a server started with c.
func (c *Certs) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: c.pool, Certificates: []tls.Certificate{c.client}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}
