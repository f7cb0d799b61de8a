// Package learnedfile reads and writes the learned-politeness file: each host's learned state,
// one JSON object per line, as crawl export --format learned writes it and crawl run
// --learned-from FILE reads it. It is its own package, with no dependency beyond the standard
// library, so that the crawl loop can read the file without the export formats' libraries.
package learnedfile
