package fleet

import (
	"testing"
	"time"
)

func TestOwnershipStateAt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := Ownership{Partition: 3, Epoch: 7, sent: t0, ttl: 9 * time.Second}
	for _, tc := range []struct {
		at   time.Duration
		want LeaseState
	}{
		{0, Held},
		{3*time.Second - time.Nanosecond, Held},
		{3 * time.Second, RenewDue},
		{7 * time.Second, RenewDue},
		{9*time.Second - 9*time.Second/safetyDiv - time.Nanosecond, RenewDue},
		{9*time.Second - 9*time.Second/safetyDiv, Lapsed},
		{9 * time.Second, Lapsed},
		{time.Hour, Lapsed},
	} {
		t.Run(tc.at.String(), func(t *testing.T) {
			if got := o.StateAt(t0.Add(tc.at)); got != tc.want {
				t.Fatalf("StateAt(sent+%v) = %v, want %v", tc.at, got, tc.want)
			}
		})
	}
	if !o.StopAt().Before(t0.Add(o.ttl)) {
		t.Fatalf("StopAt %v is not before the lease's earliest expiry %v", o.StopAt(), t0.Add(o.ttl))
	}
}

// A renewal moves the clock the ownership is judged by to the renewal's send time.
func TestOwnershipRenewedIsHeldAgain(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := Ownership{sent: t0, ttl: 3 * time.Second}
	late := t0.Add(2900 * time.Millisecond)
	if o.StateAt(late) != Lapsed {
		t.Fatalf("not lapsed at %v", late.Sub(t0))
	}
	o.sent = t0.Add(time.Second) // what Renew does with the send time it is given
	if got := o.StateAt(t0.Add(1500 * time.Millisecond)); got != Held {
		t.Fatalf("renewed ownership at +0.5 s: %v, want held", got)
	}
}

func TestLeaseStateString(t *testing.T) {
	for s, want := range map[LeaseState]string{Held: "held", RenewDue: "renew-due", Lapsed: "lapsed", 0: "LeaseState(0)"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", int(s), s.String(), want)
		}
	}
}
