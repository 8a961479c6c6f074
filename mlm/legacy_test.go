package mlm

import (
	"strconv"
	"strings"
	"testing"
)

// TestLegacyState: the metadata of a checkpoint from before the shared
// loop is placed in the loop's terms (epoch, batch), the epoch's end moving
// to the next epoch as that loop did.
func TestLegacyState(t *testing.T) {
	conv := legacyState(32, 4) // 4 batches per epoch
	meta := func(step, epoch, pos, secs string) map[string]string {
		return map[string]string{"step": step, "epoch": epoch, "pos": pos, "elapsed_s": secs, maskKey: "m", dropoutKey: "d"}
	}
	cases := []struct {
		name              string
		meta              map[string]string
		epoch, batch, err string
	}{
		{"mid-epoch", meta("6", "1", "64", "1.5"), "1", "2", ""},
		{"end of epoch", meta("8", "1", "128", "2"), "2", "0", ""},
		{"pos not a batch", meta("6", "1", "65", "1"), "", "", "not a multiple of the batch size 32"},
		{"bad step", meta("x", "1", "64", "1"), "", "", `metadata "step"`},
		{"bad seconds", meta("6", "1", "64", "?"), "", "", `metadata "elapsed_s"`},
	}
	for _, c := range cases {
		got, err := conv(c.meta)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if e, b := got["epoch"].(int), got["batch"].(int); strconv.Itoa(e) != c.epoch || strconv.Itoa(b) != c.batch || got[maskKey] != "m" || got[dropoutKey] != "d" {
			t.Errorf("%s: %v, want epoch %s batch %s", c.name, got, c.epoch, c.batch)
		}
	}
}
