package simweb

import (
	"bytes"
	"net/http"
)

// The paths a host with HostSpec.Assets serves besides its pages. Every page links them: the
// stylesheet and icon from <head>, the image (with a srcset) and the redirect and the missing
// page from <body>. The stylesheet loads the background image and imports a second sheet.
const (
	AssetCSS      = "/static/site.css"
	AssetCSSQuery = "v=2" // the stylesheet is linked as AssetCSS?v=2
	AssetCSS2     = "/static/print.css"
	AssetIcon     = "/favicon.ico"
	AssetLogo     = "/img/logo.png"
	AssetLogo2x   = "/img/logo@2x.png"
	AssetBg       = "/img/bg.png"
	AssetMoved    = "/moved" // 301 to "/"
	AssetMissing  = "/missing"
)

// assetBodies are the requisites' bodies by path, with their Content-Type.
var assetBodies = map[string]struct{ ctype, body string }{
	AssetCSS:    {"text/css", "@import \"print.css\";\nbody { background: url(\"../img/bg.png\") }\nh1 { color: #333 }\n"},
	AssetCSS2:   {"text/css", "@media print { body { background: none } }\n"},
	AssetIcon:   {"image/x-icon", "\x00\x00\x01\x00icon"},
	AssetLogo:   {"image/png", "\x89PNG\r\n\x1a\nlogo"},
	AssetLogo2x: {"image/png", "\x89PNG\r\n\x1a\nlogo2x"},
	AssetBg:     {"image/png", "\x89PNG\r\n\x1a\nbg"},
}

// writeAssetHead writes the <head> links of a page on a host with assets.
func writeAssetHead(b *bytes.Buffer) {
	b.WriteString("<link rel=\"stylesheet\" href=\"" + AssetCSS + "?" + AssetCSSQuery + "\">\n")
	b.WriteString("<link rel=\"icon\" href=\"" + AssetIcon + "\">\n")
}

// writeAssetBody writes the <body> references of a page on a host with assets.
func writeAssetBody(b *bytes.Buffer) {
	b.WriteString("<p><img src=\"" + AssetLogo + "\" srcset=\"" + AssetLogo + " 1x, " + AssetLogo2x + " 2x\" alt=\"logo\">\n")
	b.WriteString("<a href=\"" + AssetMoved + "\">moved</a> <a href=\"" + AssetMissing + "\">missing</a></p>\n")
}

// serveAsset answers p if it is one of the asset paths and reports whether it did.
func serveAsset(w http.ResponseWriter, r *http.Request, p string) bool {
	switch p {
	case AssetMoved:
		http.Redirect(w, r, "/", http.StatusMovedPermanently)
		return true
	case AssetMissing:
		http.NotFound(w, r)
		return true
	}
	a, ok := assetBodies[p]
	if !ok {
		return false
	}
	writeBody(w, a.ctype, []byte(a.body))
	return true
}
