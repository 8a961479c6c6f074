package cuda

import (
	"strings"
	"testing"
)

// TestDoZeroDevice: Do on a Device that Open did not return panics
// instead of blocking for ever (a test that hands code a &Device{} to
// see it refused would otherwise hang when the refusal is missing).
func TestDoZeroDevice(t *testing.T) {
	defer func() {
		if r, _ := recover().(string); !strings.Contains(r, "not opened") {
			t.Errorf("recover() = %q, want the not-opened panic", r)
		}
	}()
	(&Device{}).Do(func() error { return nil })
	t.Error("Do returned")
}
