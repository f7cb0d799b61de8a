package main

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/publicsuffix"
)

// fileCookie is one line of a Netscape cookie file.
type fileCookie struct {
	host       string // the domain without its leading dot
	subdomains bool   // the cookie is sent to subdomains too
	cookie     *http.Cookie
}

// parseCookies reads a Netscape cookie file (curl's and wget's format): one cookie per line,
// seven tab-separated fields (domain, include subdomains, path, secure, expiry as Unix
// seconds with 0 for a session cookie, name, value); '#' comments and blank lines are
// skipped, and "#HttpOnly_" before a domain marks an HttpOnly cookie. A bad line is an error
// naming FILE:LINE.
func parseCookies(path string) ([]fileCookie, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []fileCookie
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		httpOnly := strings.HasPrefix(line, "#HttpOnly_")
		if httpOnly {
			line = strings.TrimPrefix(line, "#HttpOnly_")
		}
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) != 7 {
			return nil, fmt.Errorf("%s:%d: want 7 tab-separated fields (domain, subdomains, path, secure, expiry, name, value), found %d", path, n, len(fields))
		}
		exp, err := strconv.ParseInt(fields[4], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: expiry %q is not a number of seconds", path, n, fields[4])
		}
		host := strings.TrimPrefix(strings.ToLower(fields[0]), ".")
		if host == "" || fields[5] == "" {
			return nil, fmt.Errorf("%s:%d: no domain or no name", path, n)
		}
		c := &http.Cookie{Name: fields[5], Value: fields[6], Path: fields[2],
			Secure: strings.EqualFold(fields[3], "TRUE"), HttpOnly: httpOnly}
		if exp > 0 {
			c.Expires = time.Unix(exp, 0)
		}
		out = append(out, fileCookie{host: host, subdomains: strings.EqualFold(fields[1], "TRUE"), cookie: c})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return out, nil
}

// readCookieFile returns a cookie jar holding the cookies of a Netscape cookie file. Expired
// cookies are dropped; responses may set more during the crawl.
func readCookieFile(path string) (http.CookieJar, error) {
	cookies, err := parseCookies(path)
	if err != nil {
		return nil, err
	}
	jar, err := cookiejar.New(&cookiejar.Options{PublicSuffixList: publicsuffix.List})
	if err != nil {
		return nil, err
	}
	for _, fc := range cookies {
		if fc.subdomains {
			fc.cookie.Domain = fc.host
		}
		scheme := "http"
		if fc.cookie.Secure {
			scheme = "https"
		}
		jar.SetCookies(&url.URL{Scheme: scheme, Host: fc.host, Path: "/"}, []*http.Cookie{fc.cookie})
	}
	return jar, nil
}
