package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http/httpproxy"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/urlnorm"
)

// networkOptions are run's flags for how requests reach the hosts (crawler.Network).
type networkOptions struct {
	proxy    string
	headers  stringList
	auth     stringList
	cookies  string
	insecure bool
	caFile   string
}

func networkFlags(fs *flag.FlagSet) *networkOptions {
	o := &networkOptions{}
	fs.StringVar(&o.proxy, "proxy", "", "send requests through this proxy (http://, https:// or socks5:// URL); overrides HTTP_PROXY and HTTPS_PROXY, NO_PROXY still applies")
	fs.Var(&o.headers, "header", "add this header to every request, 'Name: value' (repeatable)")
	fs.Var(&o.auth, "auth", "basic auth for one host, HOST=USER:PASSWORD, sent only to that scheme and port: HOST as host[:port] for https, http://host[:port] to allow plain http (repeatable)")
	fs.StringVar(&o.cookies, "cookies", "", "send the cookies of this Netscape cookie file (as curl and wget read)")
	fs.BoolVar(&o.insecure, "insecure", false, "do not verify TLS certificates")
	fs.StringVar(&o.caFile, "ca-file", "", "also trust the CA certificates in this PEM file")
	return o
}

// addHeader adds the header name: value to *h (made if nil), or says why the crawler does not
// send it as given.
func addHeader(h *http.Header, name, value string) error {
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	switch canon := http.CanonicalHeaderKey(name); {
	case !httpguts.ValidHeaderFieldName(name):
		return fmt.Errorf("want 'Name: value'")
	case !httpguts.ValidHeaderFieldValue(value):
		return fmt.Errorf("the value has control characters")
	case canon == "User-Agent":
		return fmt.Errorf("set the user agent with --user-agent")
	case canon == "Host" || canon == "Accept-Encoding" || canon == "Content-Length" || canon == "Authorization" || canon == "Cookie":
		return fmt.Errorf("%s is set by the crawler (credentials: --auth; cookies: --cookies)", canon)
	}
	if *h == nil {
		*h = http.Header{}
	}
	h.Add(name, value)
	return nil
}

// network builds the crawler's Network from the flags and the environment (HTTP_PROXY,
// HTTPS_PROXY, NO_PROXY). Each error names the flag and what was wrong.
func (o *networkOptions) network() (crawler.Network, error) {
	var n crawler.Network
	pc := httpproxy.FromEnvironment()
	if o.proxy != "" {
		if err := checkProxy(o.proxy); err != nil {
			return n, fmt.Errorf("--proxy: %v", err)
		}
		pc.HTTPProxy, pc.HTTPSProxy = o.proxy, o.proxy
	}
	for _, p := range []string{pc.HTTPProxy, pc.HTTPSProxy} {
		if p == "" {
			continue
		}
		u, err := url.Parse(p)
		if err != nil || u.Hostname() == "" {
			u, err = url.Parse("http://" + p) // httpproxy reads a bare host:port this way
		}
		if err != nil {
			return n, fmt.Errorf("proxy %q from the environment: %s", redactURL(p), urlError(p, err))
		}
		n.Proxies = append(n.Proxies, net.JoinHostPort(u.Hostname(), proxyPort(u)))
	}
	if len(n.Proxies) > 0 {
		f := pc.ProxyFunc()
		n.Proxy = func(r *http.Request) (*url.URL, error) { return f(r.URL) }
	}
	for _, h := range o.headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok {
			return n, fmt.Errorf("--header %q: want 'Name: value'", h)
		}
		if err := addHeader(&n.Header, name, value); err != nil {
			return n, fmt.Errorf("--header %q: %v", h, err)
		}
	}
	for _, a := range o.auth {
		host, cred, ok := strings.Cut(a, "=")
		user, pass, ok2 := strings.Cut(cred, ":")
		origin, err := authOrigin(host)
		if !ok || !ok2 || user == "" || err != nil {
			return n, fmt.Errorf("--auth %q: want HOST=USER:PASSWORD", redact(a))
		}
		if n.BasicAuth == nil {
			n.BasicAuth = map[string]*url.Userinfo{}
		}
		n.BasicAuth[origin] = url.UserPassword(user, pass)
	}
	if o.cookies != "" {
		jar, err := readCookieFile(o.cookies)
		if err != nil {
			return n, fmt.Errorf("--cookies: %v", err)
		}
		n.Jar = jar
	}
	if o.insecure || o.caFile != "" {
		n.TLS = &tls.Config{InsecureSkipVerify: o.insecure}
	}
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return n, fmt.Errorf("--ca-file: %v", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return n, fmt.Errorf("--ca-file %s: no PEM certificate in it", o.caFile)
		}
		n.TLS.RootCAs = pool
	}
	return n, nil
}

// authOrigin is the origin (urlnorm.Origin) an --auth HOST stands for: host[:port] is https
// (credentials never go over plain http unless given for it), http://host[:port] and
// https://host[:port] are what they say.
func authOrigin(host string) (string, error) {
	u := &url.URL{Scheme: "https", Host: host}
	if strings.Contains(host, "://") {
		var err error
		if u, err = url.Parse(host); err != nil {
			return "", err
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.User != nil || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
			return "", fmt.Errorf("want http:// or https:// and a host")
		}
	}
	if u.Hostname() == "" || strings.ContainsAny(u.Host, "/@?#") {
		return "", fmt.Errorf("no host")
	}
	if p := u.Port(); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return "", fmt.Errorf("bad port")
		}
	}
	return urlnorm.Origin(u), nil
}

// proxyPort is the port a proxy URL is dialled on: its own, else its scheme's (as
// http.Transport and x/net/proxy choose it).
func proxyPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch u.Scheme {
	case "https":
		return "443"
	case "socks5", "socks5h":
		return "1080"
	}
	return "80"
}

// checkProxy reports what is wrong with a --proxy URL.
func checkProxy(p string) error {
	u, err := url.Parse(p)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a URL", redactURL(p))
	case u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5":
		return fmt.Errorf("%q: want an http://, https:// or socks5:// URL", redactURL(p))
	case u.Hostname() == "":
		return fmt.Errorf("%q has no host", redactURL(p))
	}
	return nil
}

// redact hides the password of a HOST=USER:PASSWORD argument.
func redact(a string) string {
	if i := strings.LastIndexByte(a, ':'); i >= 0 && strings.Contains(a[:i], "=") {
		return a[:i+1] + "…"
	}
	return a
}

// redactURL hides the password of a URL's user:password@, even in text that does not parse
// as a URL.
func redactURL(s string) string {
	shown, _ := urlnorm.RedactPassword(s)
	return shown
}

// urlError is err's text with the password of raw, a URL the user gave, hidden.
func urlError(raw string, err error) string {
	msg := err.Error()
	if _, pass := urlnorm.RedactPassword(raw); pass != "" {
		msg = strings.ReplaceAll(msg, pass, "…")
	}
	return msg
}
