package retry

import (
	"testing"

	"github.com/crawl-project/crawl/aimd"
)

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
