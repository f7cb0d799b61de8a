package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The express-rate-limit sites: Node's express serving the static site behind
// express-rate-limit (npm), the rate limiter most Node servers use. Its default store counts
// each client address's requests in a fixed window that starts at the client's first request,
// refuses the rest with 429, and says so in the rate-limit headers it is configured to send
// (and a Retry-After whenever it sends any). The npm packages are installed into the working
// directory on every run (they are no dependency of the project); without node and npm the
// sites are skipped.

// erlPackages are the npm packages the sites run on, majors pinned.
var erlPackages = []string{"express@5", "express-rate-limit@8"}

// erlServer is the Node program: one express app per site, from a JSON list of sites. Each
// request is logged to the site's log as nginx's are here ("end-time status seconds uri").
const erlServer = `'use strict';
const fs = require('fs');
const express = require('express');
const { rateLimit } = require('express-rate-limit');
for (const s of JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))) {
  const app = express();
  app.use((req, res, next) => {
    const start = process.hrtime.bigint();
    res.on('finish', () => {
      const took = Number(process.hrtime.bigint() - start) / 1e9;
      fs.appendFileSync(s.log, (Date.now() / 1000).toFixed(3) + ' ' + res.statusCode + ' ' +
        took.toFixed(6) + ' ' + req.headers.host + req.originalUrl + '\n');
    });
    next();
  });
  app.use(rateLimit({
    windowMs: s.windowMs, limit: s.limit,
    standardHeaders: s.headers.startsWith('draft-') ? s.headers : false,
    legacyHeaders: s.headers === 'legacy',
  }));
  app.use(express.static(s.root));
  app.listen(s.port, '127.0.0.1');
}
`

// erlSite is one site's entry in the server's JSON list.
type erlSite struct {
	Port     int    `json:"port"`
	Root     string `json:"root"`
	Log      string `json:"log"`
	Limit    int    `json:"limit"`
	WindowMs int    `json:"windowMs"`
	Headers  string `json:"headers"`
}

// node holds the paths of node and npm.
type node struct{ node, npm string }

func findNode() (node, error) {
	var n node
	var err error
	if n.node, err = exec.LookPath("node"); err != nil {
		return n, fmt.Errorf("node not found on PATH (Debian: apt-get install nodejs npm)")
	}
	if n.npm, err = exec.LookPath("npm"); err != nil {
		return n, fmt.Errorf("npm not found on PATH (Debian: apt-get install npm)")
	}
	return n, nil
}

// startExpress installs the npm packages under dir/node, writes the server and its site list
// there, and starts it on the sites' ports.
func startExpress(n node, dir string, ss []site, ports []int) (stop func() error, err error) {
	nd := filepath.Join(dir, "node")
	if err := os.MkdirAll(nd, 0o755); err != nil {
		return nil, err
	}
	install := exec.Command(n.npm, append([]string{"install", "--no-audit", "--no-fund", "--silent", "--prefix", nd}, erlPackages...)...)
	if out, err := install.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("npm install %s: %v: %s", strings.Join(erlPackages, " "), err, out)
	}
	var list []erlSite
	for _, s := range ss {
		if s.express() {
			list = append(list, erlSite{Port: s.port, Root: filepath.Join(dir, "site", s.name), Log: filepath.Join(dir, s.name+".log"),
				Limit: s.erlN, WindowMs: s.erlWindow * 1000, Headers: s.erlHeaders})
		}
	}
	conf, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(nd, "sites.json"), conf, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(nd, "server.js"), []byte(erlServer), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(n.node, filepath.Join(nd, "server.js"), filepath.Join(nd, "sites.json"))
	cmd.Dir = nd
	// Each request's log line is written before the next is read (appendFileSync), so a
	// SIGTERM leaves the logs complete.
	return start("express", cmd, syscall.SIGTERM, filepath.Join(dir, "express-error.log"), ports)
}
