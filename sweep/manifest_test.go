package sweep

import "testing"

// TestCountsText: the counts in the statuses' order, the empty ones left
// out.
func TestCountsText(t *testing.T) {
	for _, tc := range []struct {
		counts map[string]int
		want   string
	}{
		{nil, ""},
		{map[string]int{CellDone: 3}, "3 done"},
		{map[string]int{CellSkipped: 2, CellFailed: 1, CellDone: 4, CellPending: 0}, "4 done, 1 failed, 2 skipped"},
		{map[string]int{CellInterrupted: 1, CellRunning: 2, CellPending: 5}, "2 running, 5 pending, 1 interrupted"},
	} {
		if got := (&Manifest{Counts: tc.counts}).CountsText(); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.counts, got, tc.want)
		}
	}
}
