// Package metrics turns the crawl's events and status ticks into Prometheus metrics, and serves
// them over HTTP for `crawl run --metrics-addr`. Its one job is that translation; the crawl loop
// knows nothing of Prometheus (it talks to a crawler.Observer, which Collector implements).
//
// Metrics follow the Prometheus naming conventions: prefix crawl_, base units (seconds), _total
// on counters, and label values from small fixed sets. Per-host series exist only for the
// busiest TopHosts hosts at each scrape (hosts with work queued or in flight first, then most
// pages fetched), so the number of series stays bounded however many hosts a crawl meets.
//
// Counted from events (they only grow while the process runs):
//
//	crawl_requests_total{kind="page|robots",class="1xx|2xx|3xx|4xx|5xx|error"}
//	crawl_request_errors_total{kind="timeout|conn-refused|conn-reset|dns|tls|protocol|other|…"}
//	crawl_over_limit_responses_total{code="429|503"}
//	crawl_request_duration_seconds{kind}            histogram: request sent until body read
//	crawl_retries_total{reason="status-429|timeout|…"}
//	crawl_retry_budget_exhaustions_total{scope="host|global"}
//	crawl_limiter_wait_seconds                     histogram: ready work waiting for its host's gate
//
// Read from the latest status tick (about once a second):
//
//	crawl_frontier_urls{state="queued|leased|fetched|failed|excluded"}  queued: waiting, retries included
//	crawl_frontier_oldest_ready_age_seconds        see crawler.Tick.OldestReady
//	crawl_requests_in_flight
//	crawl_retry_budget_balance_tokens              the whole crawl's retry budget
//	crawl_hosts, crawl_hosts_active, crawl_hosts_paused
//	crawl_host_rate_requests_per_second{host}      the rate the host's controller chose
//	crawl_host_accepted_rate_requests_per_second{host}
//	crawl_host_window_requests{host}               concurrency window
//	crawl_host_in_flight_requests{host}
//	crawl_host_latency_p95_seconds{host}, crawl_host_latency_baseline_seconds{host}
//	crawl_host_queued_urls{host}, crawl_host_fetched_urls{host}
//	crawl_host_over_limit_responses{host}          429/503 replies the controller has seen
//	crawl_host_retry_budget_balance_tokens{host}
//	crawl_host_paused{host}                        1 while a Retry-After pause runs
//
// plus the client library's standard go_* and process_* metrics.
package metrics
