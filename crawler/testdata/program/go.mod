module example.com/program

go 1.26.8

require github.com/crawl-project/crawl v0.0.0

require (
	github.com/PuerkitoBio/goquery v1.13.0 // indirect
	github.com/andybalholm/brotli v1.2.8 // indirect
	github.com/andybalholm/cascadia v1.3.4 // indirect
	github.com/dunglas/httpsfv v1.1.2 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/miekg/dns v1.1.73 // indirect
	github.com/tdewolff/parse/v2 v2.8.20 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)

replace github.com/crawl-project/crawl => ../../..
