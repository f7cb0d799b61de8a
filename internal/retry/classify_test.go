package retry

import (
	"strconv"
	"testing"

	"github.com/crawl-project/crawl/aimd"
)

// TestKindOf: the one reading of status codes, and what the crawl's counters make of it.
func TestKindOf(t *testing.T) {
	tests := []struct {
		status   int
		kind     StatusKind
		slowDown bool
		failed   bool
	}{
		{0, NoResponse, false, true}, // a transport error
		{200, Served, false, false},
		{204, Served, false, false},
		{301, Served, false, false},
		{304, Served, false, false},
		{400, ClientError, false, false},
		{403, ClientError, false, false},
		{404, ClientError, false, false},
		{418, ClientError, false, false},
		{408, TimedOut, false, false},
		{425, TimedOut, false, false},
		{420, TooMany, true, false}, // Twitter's "Enhance Your Calm"
		{429, TooMany, true, false},
		{503, Overloaded, true, false},
		{509, Overloaded, true, false}, // Bandwidth Limit Exceeded
		{529, Overloaded, true, false}, // Site is overloaded
		{500, ServerError, false, true},
		{501, ServerError, false, true},
		{505, ServerError, false, true},
		{511, ServerError, false, true},
		{525, ServerError, false, true},
		{502, BadGateway, false, true},
		{504, BadGateway, false, true},
		{520, BadGateway, false, true},
		{524, BadGateway, false, true},
		{598, BadGateway, false, true},
		{599, BadGateway, false, true},
		{100, Unknown, false, true},
		{999, Unknown, false, true},
		{-1, Unknown, false, true},
	}
	for _, tc := range tests {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			k := KindOf(tc.status)
			if k != tc.kind || k.SlowDown() != tc.slowDown || k.Failed() != tc.failed {
				t.Errorf("KindOf(%d) = %v (slow down %v, failed %v), want %v (%v, %v)",
					tc.status, k, k.SlowDown(), k.Failed(), tc.kind, tc.slowDown, tc.failed)
			}
			if k.SlowDown() != (ClassifyStatus(tc.status).Signal == aimd.Overload) {
				t.Errorf("KindOf(%d).SlowDown() = %v, but ClassifyStatus gives %v", tc.status, k.SlowDown(), ClassifyStatus(tc.status).Signal)
			}
		})
	}
}

func TestClassifyStatus(t *testing.T) {
	tests := []struct {
		status    int
		retryable bool
		signal    aimd.Signal
	}{
		{200, false, aimd.Success},
		{204, false, aimd.Success},
		{301, false, aimd.Success},
		{304, false, aimd.Success},
		{400, false, aimd.Success},
		{403, false, aimd.Success},
		{404, false, aimd.Success},
		{410, false, aimd.Success},
		{408, true, aimd.Failure},
		{425, true, aimd.Failure},
		{429, true, aimd.Overload},
		{500, true, aimd.Neutral},
		{501, false, aimd.Neutral},
		{502, true, aimd.Failure},
		{503, true, aimd.Overload},
		{504, true, aimd.Failure},
		{505, false, aimd.Neutral},
		{420, true, aimd.Overload},
		{509, true, aimd.Overload},
		{529, true, aimd.Overload},
		{520, true, aimd.Failure},
		{522, true, aimd.Failure},
		{524, true, aimd.Failure},
		{525, false, aimd.Neutral}, // Cloudflare: TLS handshake failed; a retry gets the same
		{598, true, aimd.Failure},
		{599, true, aimd.Failure},
		{511, false, aimd.Neutral},
		{418, false, aimd.Success},
		{100, false, aimd.Neutral},
		{0, false, aimd.Neutral},
		{999, false, aimd.Neutral},
	}
	for _, tc := range tests {
		c := ClassifyStatus(tc.status)
		if c.Retryable != tc.retryable || c.Signal != tc.signal {
			t.Errorf("ClassifyStatus(%d) = %+v, want retryable %v signal %v", tc.status, c, tc.retryable, tc.signal)
		}
	}
	if r := ClassifyStatus(503).Reason; r != "status-503" {
		t.Errorf("Reason = %q, want status-503", r)
	}
}

func TestClassifyError(t *testing.T) {
	tests := []struct {
		kind      string
		retryable bool
		signal    aimd.Signal
		reason    string
	}{
		{"timeout", true, aimd.Failure, "timeout"},
		{"conn-reset", true, aimd.Failure, "conn-reset"},
		{"conn-refused", true, aimd.Failure, "conn-refused"},
		{"dns", true, aimd.Neutral, "dns"},
		{"canceled", true, aimd.Neutral, "canceled"},
		{"tls", false, aimd.Neutral, "tls"},
		{"protocol", false, aimd.Neutral, "protocol"},
		{"other", false, aimd.Neutral, "other"},
		{"something new", false, aimd.Neutral, "other"},
		{"", false, aimd.Neutral, "other"},
	}
	for _, tc := range tests {
		c := ClassifyError(tc.kind)
		if c.Retryable != tc.retryable || c.Signal != tc.signal || c.Reason != tc.reason {
			t.Errorf("ClassifyError(%q) = %+v, want {%v %v %q}", tc.kind, c, tc.retryable, tc.signal, tc.reason)
		}
	}
}
